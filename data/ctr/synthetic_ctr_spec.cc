#include "data/ctr/synthetic_ctr_spec.h"

#include <cmath>
#include <map>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

// Criteo-like: the spread of the Criteo display-ads tables (a few categories to millions of
// rows), with the largest cut so that the 26 hold about 2x10^7 rows.
constexpr int64_t kCriteoLike[26] = {1460,   583,    6000000, 2000000, 305,     24,    12517,
                                     633,    3,      93145,   5683,    5000000, 3194,  27,
                                     14992,  3000000, 10,     5652,    2173,    4,     3500000,
                                     18,     15,     286181,  105,     142572};

const std::set<std::string>& KnownKeys() {
  static const auto* keys = new std::set<std::string>{
      "examples", "offset",  "dense", "tables", "vocab",      "scale",  "hot",
      "missing",  "zipf",    "ids",   "seed",   "click_rate", "signal", "interaction",
      "dim",      "preset"};
  return *keys;
}

absl::Status KeyError(absl::string_view key, absl::string_view value, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("synthetic_ctr spec: key \"", key, "\" (\"", value, "\"): ", why));
}

absl::StatusOr<int64_t> ParseInt(absl::string_view key, absl::string_view value, int64_t lo,
                                 int64_t hi) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v)) return KeyError(key, value, "not an integer");
  if (v < lo || v > hi) {
    return KeyError(key, value, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  }
  return v;
}

absl::StatusOr<double> ParseDouble(absl::string_view key, absl::string_view value, double lo,
                                   double hi) {
  double v = 0;
  if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) {
    return KeyError(key, value, "not a number");
  }
  if (v < lo || v > hi) {
    return KeyError(key, value, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  }
  return v;
}

constexpr int64_t kMaxVocab = int64_t{1} << 62;

struct Hot {
  int hotness;
  bool variable;
};

std::string Double(double v) { return absl::StrFormat("%.17g", v); }

// The spec's key=value pairs by key.
using SpecValues = std::map<std::string, std::string>;

// The value of `key`, or nullptr when the spec does not give it.
const std::string* Find(const SpecValues& kv, const char* key) {
  auto it = kv.find(key);
  return it == kv.end() ? nullptr : &it->second;
}

// Splits "k=v,k=v" (no prefix) into its pairs: INVALID_ARGUMENT for an item that is not
// key=value, an unknown key or a key given twice, whichever comes first.
absl::StatusOr<SpecValues> SplitSpec(absl::string_view spec) {
  SpecValues kv;
  if (spec.empty()) return kv;
  for (absl::string_view item : absl::StrSplit(spec, ',')) {
    const size_t eq = item.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic_ctr spec: \"", item, "\" is not key=value"));
    }
    const std::string key(item.substr(0, eq));
    if (KnownKeys().count(key) == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic_ctr spec: unknown key \"", key, "\" (known: ",
                       absl::StrJoin(KnownKeys(), ", "), ")"));
    }
    if (!kv.emplace(key, std::string(item.substr(eq + 1))).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("synthetic_ctr spec: key \"", key, "\" given twice"));
    }
  }
  return kv;
}

// preset, examples, offset, dense and scale, in that order; *vocab_text is the vocab key's
// text (or the preset's, or the default) for ParseTables.
absl::Status ParseSizes(const SpecValues& kv, SyntheticCtrConfig* c, std::string* vocab_text,
                        double* scale) {
  *vocab_text = "100000";
  if (const std::string* v = Find(kv, "preset")) {
    if (*v != "criteo_like") return KeyError("preset", *v, "known presets: criteo_like");
    c->num_dense = 13;
    *vocab_text = "criteo_like";
  }
  if (const std::string* v = Find(kv, "vocab")) *vocab_text = *v;
  if (const std::string* v = Find(kv, "examples")) {
    ASSIGN_OR_RETURN(c->num_examples, ParseInt("examples", *v, 1, int64_t{1} << 62));
  }
  if (const std::string* v = Find(kv, "offset")) {
    ASSIGN_OR_RETURN(c->offset, ParseInt("offset", *v, 0, int64_t{1} << 62));
  }
  if (const std::string* v = Find(kv, "dense")) {
    ASSIGN_OR_RETURN(int64_t d, ParseInt("dense", *v, 0, 1024));
    c->num_dense = static_cast<int>(d);
  }
  if (const std::string* v = Find(kv, "scale")) {
    ASSIGN_OR_RETURN(*scale, ParseDouble("scale", *v, 1e-9, 1e6));
  }
  return absl::OkStatus();
}

// The vocab sizes (before scaling) of "criteo_like" or "V" or "V1|V2|...".
absl::StatusOr<std::vector<int64_t>> ParseVocabList(absl::string_view vocab_text) {
  if (vocab_text == "criteo_like") return CriteoLikeVocabSizes(1.0);
  std::vector<int64_t> vocab;
  for (absl::string_view part : absl::StrSplit(vocab_text, '|')) {
    ASSIGN_OR_RETURN(int64_t v, ParseInt("vocab", part, 1, kMaxVocab));
    vocab.push_back(v);
  }
  return vocab;
}

// The hotness of "N" or "1..N", or of a list of these separated by '|'.
absl::StatusOr<std::vector<Hot>> ParseHotList(absl::string_view hot_text) {
  std::vector<Hot> hot;
  for (absl::string_view part : absl::StrSplit(hot_text, '|')) {
    absl::string_view n = part;
    const bool variable = absl::ConsumePrefix(&n, "1..");
    ASSIGN_OR_RETURN(int64_t h, ParseInt("hot", n, 1, 1024));
    hot.push_back(Hot{static_cast<int>(h), variable});
  }
  return hot;
}

// The table count: the tables key, else the length of a vocab or hot list, else 26; then
// INVALID_ARGUMENT when a list's length differs from it (vocab checked first).
absl::StatusOr<int64_t> CountTables(const SpecValues& kv, const std::vector<int64_t>& vocab,
                                    absl::string_view vocab_text, const std::vector<Hot>& hot,
                                    absl::string_view hot_text) {
  int64_t tables = 0;
  if (const std::string* v = Find(kv, "tables")) {
    ASSIGN_OR_RETURN(tables, ParseInt("tables", *v, 1, 4096));
  } else if (vocab.size() > 1) {
    tables = static_cast<int64_t>(vocab.size());
  } else if (hot.size() > 1) {
    tables = static_cast<int64_t>(hot.size());
  } else {
    tables = 26;
  }
  if (vocab.size() > 1 && static_cast<int64_t>(vocab.size()) != tables) {
    return KeyError("vocab", vocab_text,
                    absl::StrCat("lists ", vocab.size(), " sizes for ", tables, " tables"));
  }
  if (hot.size() > 1 && static_cast<int64_t>(hot.size()) != tables) {
    return KeyError("hot", hot_text,
                    absl::StrCat("lists ", hot.size(), " counts for ", tables, " tables"));
  }
  return tables;
}

// vocab, hot and tables: fills c->features, each vocab size scaled by `scale`.
absl::Status ParseTables(const SpecValues& kv, const std::string& vocab_text, double scale,
                         SyntheticCtrConfig* c) {
  ASSIGN_OR_RETURN(const std::vector<int64_t> vocab, ParseVocabList(vocab_text));
  const std::string hot_text = Find(kv, "hot") ? *Find(kv, "hot") : "1";
  ASSIGN_OR_RETURN(const std::vector<Hot> hot, ParseHotList(hot_text));
  ASSIGN_OR_RETURN(const int64_t tables, CountTables(kv, vocab, vocab_text, hot, hot_text));
  for (int64_t f = 0; f < tables; ++f) {
    SyntheticFeatureConfig fc;
    const int64_t v = vocab.size() == 1 ? vocab[0] : vocab[f];
    fc.vocab_size = std::min<int64_t>(
        kMaxVocab, std::max<int64_t>(1, std::llround(static_cast<double>(v) * scale)));
    const Hot& h = hot.size() == 1 ? hot[0] : hot[f];
    fc.hotness = h.hotness;
    fc.variable_hotness = h.variable;
    c->features.push_back(fc);
  }
  return absl::OkStatus();
}

// missing, zipf, ids, seed, click_rate, signal, interaction and dim, in that order.
absl::Status ParseDistribution(const SpecValues& kv, SyntheticCtrConfig* c) {
  if (const std::string* v = Find(kv, "missing")) {
    ASSIGN_OR_RETURN(c->missing, ParseDouble("missing", *v, 0, 1));
  }
  if (const std::string* v = Find(kv, "zipf")) {
    ASSIGN_OR_RETURN(c->zipf, ParseDouble("zipf", *v, 0, 100));
  }
  if (const std::string* v = Find(kv, "ids")) {
    if (*v != "range" && *v != "hashed") return KeyError("ids", *v, "must be range or hashed");
    c->hashed_ids = *v == "hashed";
  }
  if (const std::string* v = Find(kv, "seed")) {
    if (!absl::SimpleAtoi(*v, &c->seed)) return KeyError("seed", *v, "not a uint64");
  }
  if (const std::string* v = Find(kv, "click_rate")) {
    ASSIGN_OR_RETURN(c->click_rate, ParseDouble("click_rate", *v, 0.01, 0.99));
  }
  if (const std::string* v = Find(kv, "signal")) {
    ASSIGN_OR_RETURN(c->signal, ParseDouble("signal", *v, 0, 20));
  }
  if (const std::string* v = Find(kv, "interaction")) {
    ASSIGN_OR_RETURN(c->interaction, ParseDouble("interaction", *v, 0, 1));
  }
  if (const std::string* v = Find(kv, "dim")) {
    ASSIGN_OR_RETURN(int64_t d, ParseInt("dim", *v, 1, 64));
    c->dim = static_cast<int>(d);
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<int64_t> CriteoLikeVocabSizes(double scale) {
  std::vector<int64_t> sizes;
  for (int64_t v : kCriteoLike) {
    sizes.push_back(std::max<int64_t>(1, std::llround(static_cast<double>(v) * scale)));
  }
  return sizes;
}

absl::Status ValidateSyntheticCtrConfig(const SyntheticCtrConfig& c) {
  auto bad = [](absl::string_view key, auto value, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("synthetic_ctr config: ", key, " = ", value, ": ", why));
  };
  if (c.num_examples < 1) return bad("examples", c.num_examples, "must be >= 1");
  if (c.offset < 0 || c.offset > (int64_t{1} << 62) - c.num_examples) {
    return bad("offset", c.offset, "must be >= 0 and offset + examples <= 2^62");
  }
  if (c.num_dense < 0 || c.num_dense > 1024) return bad("dense", c.num_dense, "must be 0..1024");
  if (c.features.empty() || c.features.size() > 4096) {
    return bad("tables", c.features.size(), "must be 1..4096");
  }
  for (size_t f = 0; f < c.features.size(); ++f) {
    const SyntheticFeatureConfig& fc = c.features[f];
    if (fc.vocab_size < 1 || fc.vocab_size > kMaxVocab) {
      return bad(absl::StrCat("vocab of table ", f), fc.vocab_size, "must be in [1, 2^62]");
    }
    if (fc.hotness < 1 || fc.hotness > 1024) {
      return bad(absl::StrCat("hot of table ", f), fc.hotness, "must be 1..1024");
    }
  }
  if (!(c.missing >= 0 && c.missing <= 1)) return bad("missing", c.missing, "must be 0..1");
  if (!(c.zipf >= 0 && c.zipf <= 100)) return bad("zipf", c.zipf, "must be 0..100");
  if (!(c.click_rate >= 0.01 && c.click_rate <= 0.99)) {
    return bad("click_rate", c.click_rate, "must be 0.01..0.99");
  }
  if (!(c.signal >= 0 && c.signal <= 20)) return bad("signal", c.signal, "must be 0..20");
  if (!(c.interaction >= 0 && c.interaction <= 1)) {
    return bad("interaction", c.interaction, "must be 0..1");
  }
  if (c.dim < 1 || c.dim > 64) return bad("dim", c.dim, "must be 1..64");
  return absl::OkStatus();
}

absl::StatusOr<SyntheticCtrConfig> ParseSyntheticCtrSpec(absl::string_view spec) {
  absl::ConsumePrefix(&spec, kSyntheticCtrPrefix);
  ASSIGN_OR_RETURN(const SpecValues kv, SplitSpec(spec));
  SyntheticCtrConfig c;
  std::string vocab_text;
  double scale = 1;
  RETURN_IF_ERROR(ParseSizes(kv, &c, &vocab_text, &scale));
  RETURN_IF_ERROR(ParseTables(kv, vocab_text, scale, &c));
  RETURN_IF_ERROR(ParseDistribution(kv, &c));
  if (c.offset > (int64_t{1} << 62) - c.num_examples) {
    return KeyError("offset", *Find(kv, "offset"), "offset + examples must be <= 2^62");
  }
  RETURN_IF_ERROR(ValidateSyntheticCtrConfig(c));
  return c;
}

std::string FormatSyntheticCtrSpec(const SyntheticCtrConfig& c) {
  std::vector<std::string> vocab;
  std::vector<std::string> hot;
  for (const SyntheticFeatureConfig& f : c.features) {
    vocab.push_back(absl::StrCat(f.vocab_size));
    hot.push_back(absl::StrCat(f.variable_hotness ? "1.." : "", f.hotness));
  }
  return absl::StrCat(kSyntheticCtrPrefix, "examples=", c.num_examples, ",offset=", c.offset,
                      ",dense=", c.num_dense, ",tables=", c.features.size(),
                      ",vocab=", absl::StrJoin(vocab, "|"), ",hot=", absl::StrJoin(hot, "|"),
                      ",missing=", Double(c.missing), ",zipf=", Double(c.zipf),
                      ",ids=", c.hashed_ids ? "hashed" : "range", ",seed=", c.seed,
                      ",click_rate=", Double(c.click_rate), ",signal=", Double(c.signal),
                      ",interaction=", Double(c.interaction), ",dim=", c.dim);
}

}  // namespace shardps
