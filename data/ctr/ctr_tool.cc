// ctr_tool: makes and inspects click-log files.
//
//   ctr_tool generate --spec=synthetic_ctr:... --out=F.tsv|F.tsv.gz|F.ctrbin [--examples=N]
//       writes the spec's examples (N overrides the spec's examples=); a ctrbin records the
//       spec in its description, so stats can recompute the planted AUC.
//   ctr_tool convert --in=F.tsv[.gz] --out=F.ctrbin [--skip_bad_lines] [--dense=13]
//       [--categorical=26] [--max_hotness=1]
//   ctr_tool stats F [--sample=100000]     F: a .ctrbin, a .tsv[.gz] or a synthetic_ctr spec
//       examples, click rate, per-feature distinct ids and ids per example in the first
//       --sample examples, and the planted AUC when the data is synthetic.
//
// Exit codes: 0 done, 1 the work failed (the message says why), 2 a bad command line (the
// message names the flag).
#include <algorithm>
#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/flags.h"
#include "data/ctr/criteo_tsv.h"
#include "data/ctr/ctr_binary.h"
#include "data/ctr/synthetic_ctr.h"

namespace shardps {
namespace {

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int UsageError(const std::string& message) {
  std::cerr << "ctr_tool: " << message << "\n"
            << "usage: ctr_tool generate|convert|stats|export ... (ctr_tool <command> --help)\n";
  return kExitUsage;
}

int Failed(const absl::Status& status) {
  std::cerr << "ctr_tool: " << status << "\n";
  return kExitError;
}

bool IsTsv(const std::string& path) {
  return absl::EndsWith(path, ".tsv") || absl::EndsWith(path, ".tsv.gz");
}

int Generate(const std::vector<std::string>& args) {
  std::string spec;
  std::string out;
  int64_t examples = 0;
  FlagParser flags("ctr_tool generate", "Writes synthetic click-log examples to a file.");
  flags.AddString("spec", &spec, "synthetic_ctr:key=value,... (data/ctr/synthetic_ctr_spec.h)");
  flags.AddString("out", &out, "output: F.tsv, F.tsv.gz or F.ctrbin");
  flags.AddInt("examples", &examples, "examples to write (0: the spec's examples=)");
  std::vector<std::string> positional;
  const int rc = HandleParseResult(flags, flags.Parse(args, &positional));
  if (rc >= 0) return rc;
  if (!positional.empty()) return UsageError("generate: unexpected argument \"" + positional[0] + "\"");
  if (spec.empty()) return UsageError("generate: --spec is required");
  if (out.empty()) return UsageError("generate: --out is required");
  if (!IsTsv(out) && !absl::EndsWith(out, ".ctrbin")) {
    return UsageError("--out: \"" + out + "\" must end in .tsv, .tsv.gz or .ctrbin");
  }
  if (examples < 0) return UsageError("--examples must be >= 0");
  auto config = ParseSyntheticCtrSpec(spec);
  if (!config.ok()) return UsageError(absl::StrCat("--spec: ", config.status().message()));
  if (examples > 0) config->num_examples = examples;
  auto source = SyntheticCtrSource::Create(*config);
  if (!source.ok()) return UsageError(absl::StrCat("--spec: ", source.status().message()));
  const int64_t n = (*source)->num_examples();
  const absl::Status status =
      IsTsv(out) ? WriteCriteoTsv(**source, 0, n, out)
                 : WriteCtrBinary(**source, 0, n, out, FormatSyntheticCtrSpec(*config));
  if (!status.ok()) return Failed(status);
  std::cout << "wrote " << n << " examples to " << out << "\n";
  return 0;
}

// The schema in a schema.json as data/movielens/convert.py writes it: {"num_dense": D,
// "categorical": [{"name": ..., "vocab_size": V, "max_hotness": H}, ...]} (other keys are
// ignored). INVALID_ARGUMENT naming the file and the field.
absl::StatusOr<CtrSchema> ReadSchemaJson(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  nlohmann::json json;
  try {
    file >> json;
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not JSON: ", e.what()));
  }
  auto bad = [&](const std::string& field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": \"", field, "\": ", why));
  };
  if (!json.is_object()) return bad("", "expected an object");
  if (!json.contains("num_dense") || !json["num_dense"].is_number_integer()) {
    return bad("num_dense", "expected an integer");
  }
  if (!json.contains("categorical") || !json["categorical"].is_array()) {
    return bad("categorical", "expected an array of features");
  }
  CtrSchema schema;
  schema.num_dense = json["num_dense"].get<int>();
  for (size_t f = 0; f < json["categorical"].size(); ++f) {
    const nlohmann::json& feature = json["categorical"][f];
    const std::string where = absl::StrCat("categorical[", f, "]");
    if (!feature.is_object() || !feature.contains("name") || !feature["name"].is_string()) {
      return bad(where + ".name", "expected a string");
    }
    for (const char* key : {"vocab_size", "max_hotness"}) {
      if (!feature.contains(key) || !feature[key].is_number_integer()) {
        return bad(absl::StrCat(where, ".", key), "expected an integer");
      }
    }
    schema.features.push_back({feature["name"].get<std::string>(),
                               feature["vocab_size"].get<int64_t>(),
                               std::max(1, feature["max_hotness"].get<int>())});
  }
  const absl::Status valid = ValidateSchema(schema);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", valid.message()));
  return schema;
}

// Fixed-size records for a reader without a click-log parser (the TensorFlow peer of
// bench/ctr_vs_tf.sh reads them with tf.data): F.bin holds, per example, f32 label, f32
// dense[D], i64 ids[T] (one id per table: one-hot data only), little-endian; F.json says
// {"examples", "dense", "tables", "vocab": [...], "record_bytes", "spec"}.
int Export(const std::vector<std::string>& args) {
  std::string spec;
  std::string out;
  FlagParser flags("ctr_tool export",
                   "Writes a one-hot synthetic spec as fixed-size records (F.bin, F.json).");
  flags.AddString("spec", &spec, "synthetic_ctr:key=value,... (data/ctr/synthetic_ctr_spec.h)");
  flags.AddString("out", &out, "output F.bin (F.json is written beside it)");
  std::vector<std::string> positional;
  const int rc = HandleParseResult(flags, flags.Parse(args, &positional));
  if (rc >= 0) return rc;
  if (!positional.empty()) return UsageError("export: unexpected argument \"" + positional[0] + "\"");
  if (spec.empty()) return UsageError("export: --spec is required");
  if (!absl::EndsWith(out, ".bin")) return UsageError("--out: \"" + out + "\" must end in .bin");
  auto source = SyntheticCtrSource::FromSpec(spec);
  if (!source.ok()) return UsageError(absl::StrCat("--spec: ", source.status().message()));
  const CtrSchema& schema = (*source)->schema();
  const int64_t n = (*source)->num_examples();
  std::ofstream file(out, std::ios::binary | std::ios::trunc);
  if (!file) return Failed(absl::NotFoundError(absl::StrCat(out, ": cannot write")));
  CtrBatch batch;
  std::vector<char> record;
  for (int64_t begin = 0; begin < n; begin += 65536) {
    const absl::Status status = ReadRange(**source, begin, std::min(n, begin + 65536), &batch);
    if (!status.ok()) return Failed(status);
    for (int j = 0; j < batch.size; ++j) {
      record.clear();
      auto put = [&](const void* p, size_t bytes) {
        record.insert(record.end(), static_cast<const char*>(p), static_cast<const char*>(p) + bytes);
      };
      put(&batch.labels[j], sizeof(float));
      put(batch.dense.data() + static_cast<size_t>(j) * schema.num_dense,
          sizeof(float) * schema.num_dense);
      for (size_t f = 0; f < batch.features.size(); ++f) {
        const CtrFeatureIds& ids = batch.features[f];
        if (ids.offsets[j + 1] - ids.offsets[j] != 1) {
          return UsageError(absl::StrCat("export: example ", begin + j, " has ",
                                         ids.offsets[j + 1] - ids.offsets[j], " ids of feature \"",
                                         schema.features[f].name,
                                         "\"; export takes one-hot data (hot=1, missing=0)"));
        }
        put(&ids.ids[ids.offsets[j]], sizeof(int64_t));
      }
      file.write(record.data(), static_cast<std::streamsize>(record.size()));
    }
  }
  file.close();
  if (!file) return Failed(absl::DataLossError(absl::StrCat(out, ": write failed")));
  std::string vocab;
  for (const CtrFeature& f : schema.features) {
    absl::StrAppend(&vocab, vocab.empty() ? "" : ", ", f.vocab_size);
  }
  std::ofstream json(out.substr(0, out.size() - 4) + ".json", std::ios::trunc);
  json << "{\"examples\": " << n << ", \"dense\": " << schema.num_dense
       << ", \"tables\": " << schema.features.size() << ", \"vocab\": [" << vocab
       << "], \"record_bytes\": " << 4 * (1 + schema.num_dense) + 8 * schema.features.size()
       << ", \"spec\": \"" << spec << "\"}\n";
  std::cout << "exported " << n << " examples to " << out << "\n";
  return 0;
}

int Convert(const std::vector<std::string>& args) {
  std::string in;
  std::string out;
  std::string schema_file;
  bool skip_bad_lines = false;
  int64_t dense = 13;
  int64_t categorical = 26;
  int64_t max_hotness = 1;
  FlagParser flags("ctr_tool convert", "Converts a Criteo TSV file into a ctrbin file.");
  flags.AddString("in", &in, "input F.tsv or F.tsv.gz");
  flags.AddString("out", &out, "output F.ctrbin");
  flags.AddBool("skip_bad_lines", &skip_bad_lines, "count and skip bad lines instead of failing");
  flags.AddInt("dense", &dense, "integer fields after the label");
  flags.AddInt("categorical", &categorical, "hex id fields after the integers");
  flags.AddInt("max_hotness", &max_hotness, "most ids in one categorical field");
  flags.AddString("schema", &schema_file,
                  "schema.json (data/movielens/convert.py's): feature names, vocabularies and "
                  "hotness, instead of --dense, --categorical and --max_hotness");
  std::vector<std::string> positional;
  const int rc = HandleParseResult(flags, flags.Parse(args, &positional));
  if (rc >= 0) return rc;
  if (!positional.empty()) return UsageError("convert: unexpected argument \"" + positional[0] + "\"");
  if (in.empty()) return UsageError("convert: --in is required");
  if (out.empty()) return UsageError("convert: --out is required");
  if (!absl::EndsWith(out, ".ctrbin")) return UsageError("--out: \"" + out + "\" must end in .ctrbin");
  if (dense < 0 || dense > 100000) return UsageError("--dense must be 0..100000");
  if (categorical < 0 || categorical > 100000) return UsageError("--categorical must be 0..100000");
  if (max_hotness < 1 || max_hotness > 1000000) return UsageError("--max_hotness must be >= 1");
  CriteoTsvOptions options;
  options.schema = CriteoSchema(static_cast<int>(dense), static_cast<int>(categorical),
                                static_cast<int>(max_hotness));
  if (!schema_file.empty()) {
    for (const std::string& arg : args) {
      for (const char* flag : {"--dense", "--categorical", "--max_hotness"}) {
        if (arg == flag || absl::StartsWith(arg, absl::StrCat(flag, "="))) {
          return UsageError(absl::StrCat(flag, " and --schema: give one or the other"));
        }
      }
    }
    auto schema = ReadSchemaJson(schema_file);
    if (!schema.ok()) return UsageError(absl::StrCat("--schema: ", schema.status().message()));
    options.schema = *std::move(schema);
  }
  options.skip_bad_lines = skip_bad_lines;
  auto stats = ConvertCriteoTsvToBinary(in, out, options);
  if (!stats.ok()) return Failed(stats.status());
  std::cout << "converted " << stats->examples << " examples from " << in << " to " << out;
  if (skip_bad_lines) std::cout << "; skipped " << stats->bad_lines << " bad lines";
  std::cout << "\n";
  return 0;
}

// Prints what stats prints about the first examples of `batch`.
void PrintSample(const CtrSchema& schema, const CtrBatch& batch) {
  double clicks = 0;
  for (float y : batch.labels) clicks += y;
  std::printf("sample: %d examples, click rate %.4f\n", batch.size,
              batch.size > 0 ? clicks / batch.size : 0.0);
  std::printf("%-10s %12s %14s %12s\n", "feature", "vocab", "distinct ids", "ids/example");
  for (size_t f = 0; f < schema.features.size(); ++f) {
    const CtrFeatureIds& ids = batch.features[f];
    const std::unordered_set<int64_t> distinct(ids.ids.begin(), ids.ids.end());
    std::printf("%-10s %12lld %14zu %12.3f\n", schema.features[f].name.c_str(),
                static_cast<long long>(schema.features[f].vocab_size), distinct.size(),
                batch.size > 0 ? static_cast<double>(ids.ids.size()) / batch.size : 0.0);
  }
}

int PrintPlanted(const std::string& spec, int64_t sample) {
  auto source = SyntheticCtrSource::FromSpec(spec);
  if (!source.ok()) return Failed(source.status());
  const int64_t n = std::min(sample, (*source)->num_examples());
  auto m = (*source)->ComputePlantedMetrics(0, n);
  if (!m.ok()) return Failed(m.status());
  std::printf("planted model over %lld examples: AUC %.4f (the ceiling), log loss %.4f, "
              "mean probability %.4f\n",
              static_cast<long long>(m->examples), m->auc, m->log_loss, m->mean_probability);
  return 0;
}

int Stats(const std::vector<std::string>& args) {
  int64_t sample = 100000;
  FlagParser flags("ctr_tool stats", "Describes a click-log file or synthetic spec.");
  flags.AddInt("sample", &sample, "examples to sample from the start");
  std::vector<std::string> positional;
  const int rc = HandleParseResult(flags, flags.Parse(args, &positional));
  if (rc >= 0) return rc;
  if (positional.size() != 1) return UsageError("stats: expected one file or spec");
  if (sample < 1 || sample > 100000000) return UsageError("--sample must be 1..10^8");
  const std::string& what = positional[0];
  CtrBatch batch;
  if (IsTsv(what)) {
    // Criteo's layout; every line is counted, the first --sample are described.
    CriteoTsvOptions options;
    options.skip_bad_lines = true;
    auto reader = CriteoTsvReader::Open(what, options);
    if (!reader.ok()) return Failed(reader.status());
    absl::Status status = (*reader)->ReadBatch(static_cast<int>(sample), &batch);
    if (!status.ok()) return Failed(status);
    int64_t examples = batch.size;
    CtrBatch rest;
    for (;;) {
      status = (*reader)->ReadBatch(65536, &rest);
      if (!status.ok()) return Failed(status);
      if (rest.size == 0) break;
      examples += rest.size;
    }
    std::printf("%s: Criteo TSV, %lld examples, %lld bad lines skipped\n", what.c_str(),
                static_cast<long long>(examples), static_cast<long long>((*reader)->bad_lines()));
    PrintSample((*reader)->schema(), batch);
    return 0;
  }
  std::unique_ptr<CtrSource> source;
  std::string spec;
  if (absl::StartsWith(what, kSyntheticCtrPrefix)) {
    auto s = SyntheticCtrSource::FromSpec(what);
    if (!s.ok()) return UsageError(absl::StrCat("stats: ", s.status().message()));
    source = *std::move(s);
    spec = what;
    std::printf("%s\n", FormatSyntheticCtrSpec(
                            static_cast<SyntheticCtrSource&>(*source).config()).c_str());
  } else {
    auto s = CtrBinarySource::Open(what);
    if (!s.ok()) return Failed(s.status());
    std::printf("%s: ctrbin, %s\n", what.c_str(), (*s)->description().c_str());
    if (absl::StartsWith((*s)->description(), kSyntheticCtrPrefix)) spec = (*s)->description();
    source = *std::move(s);
  }
  std::printf("examples: %lld, dense features: %d, categorical features: %zu\n",
              static_cast<long long>(source->num_examples()), source->schema().num_dense,
              source->schema().features.size());
  const absl::Status status =
      ReadRange(*source, 0, std::min(sample, source->num_examples()), &batch);
  if (!status.ok()) return Failed(status);
  PrintSample(source->schema(), batch);
  if (!spec.empty()) return PrintPlanted(spec, sample);
  return 0;
}

int Main(int argc, char** argv) {
  if (argc < 2) return UsageError("expected a command: generate, convert, stats or export");
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "generate") return Generate(args);
  if (command == "convert") return Convert(args);
  if (command == "stats") return Stats(args);
  if (command == "export") return Export(args);
  if (command == "--help" || command == "help") {
    std::cout << "usage: ctr_tool generate|convert|stats|export ... (ctr_tool <command> --help)\n";
    return 0;
  }
  return UsageError("unknown command \"" + command + "\" (expected generate, convert, stats, export)");
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
