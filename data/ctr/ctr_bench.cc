// ctr_bench: examples per CPU-second of the click-log sources on one thread, printed (not a
// test; CPU time of the reading thread, since the machine is shared). Baseline in the same run: a loop that only fills a batch of the same shape with
// SplitMix64 draws (the cost of touching the memory).
//
//   bazel run -c opt //data/ctr:ctr_bench -- [--examples=2000000] [--batch=4096]
//       [--spec=synthetic_ctr:preset=criteo_like,...]
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "common/flags.h"
#include "data/ctr/ctr_binary.h"
#include "data/ctr/ctr_hash.h"
#include "data/ctr/synthetic_ctr.h"

namespace shardps {
namespace {

// CPU seconds of this thread: the machine is shared, so wall time would measure the load.
double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Examples/s reading [0, examples) in batches of consecutive shuffled-looking indices.
double Rate(const CtrSource& source, int64_t examples, int batch_size, int64_t* checksum) {
  CtrBatch batch;
  std::vector<int64_t> indices(static_cast<size_t>(batch_size));
  const double start = ThreadSeconds();
  for (int64_t begin = 0; begin + batch_size <= examples; begin += batch_size) {
    for (int k = 0; k < batch_size; ++k) {
      indices[k] = static_cast<int64_t>(Mix64(begin + k) % source.num_examples());
    }
    const absl::Status status = source.Read(indices, &batch);
    if (!status.ok()) {
      std::cerr << status << "\n";
      return 0;
    }
    *checksum += batch.features[0].ids[0];
  }
  return static_cast<double>(examples / batch_size * batch_size) / (ThreadSeconds() - start);
}

int Main(int argc, char** argv) {
  int64_t examples = 2000000;
  int64_t batch_size = 4096;
  std::string spec = "synthetic_ctr:preset=criteo_like,examples=100000000";
  std::string binary_path = "/tmp/ctr_bench.ctrbin";
  FlagParser flags("ctr_bench", "Examples/s of the click-log sources on one thread.");
  flags.AddInt("examples", &examples, "examples to read per figure");
  flags.AddInt("batch", &batch_size, "examples per Read");
  flags.AddString("spec", &spec, "synthetic_ctr spec");
  flags.AddString("binary", &binary_path, "where to write the binary file it reads back ('' skips)");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  if (batch_size < 1 || examples < batch_size) {
    std::cerr << "ctr_bench: --batch must be in [1, --examples]\n";
    return 2;
  }
  auto source = SyntheticCtrSource::FromSpec(spec);
  if (!source.ok()) {
    std::cerr << "ctr_bench: --spec: " << source.status() << "\n";
    return 2;
  }
  int64_t checksum = 0;
  const CtrSchema& schema = (*source)->schema();

  // Baseline: fill a batch of the same shape with random values only.
  CtrBatch batch;
  SplitMix64 rng(1);
  const double start = ThreadSeconds();
  for (int64_t done = 0; done + batch_size <= examples; done += batch_size) {
    batch.Reset(schema, static_cast<int>(batch_size));
    batch.labels.resize(batch_size);
    batch.dense.resize(batch_size * schema.num_dense);
    for (int j = 0; j < batch_size; ++j) {
      batch.labels[j] = static_cast<float>(rng.Next() & 1);
      for (int d = 0; d < schema.num_dense; ++d) {
        batch.dense[j * schema.num_dense + d] = static_cast<float>(rng.Next() >> 40);
      }
      for (size_t f = 0; f < schema.features.size(); ++f) {
        batch.features[f].ids.push_back(static_cast<int64_t>(rng.Next() >> 1));
        batch.features[f].offsets.push_back(static_cast<int64_t>(batch.features[f].ids.size()));
      }
    }
    checksum += batch.features[0].ids[0];
  }
  const double baseline =
      static_cast<double>(examples / batch_size * batch_size) / (ThreadSeconds() - start);
  const double synthetic = Rate(**source, examples, static_cast<int>(batch_size), &checksum);
  std::printf("features: %d dense, %zu categorical\n", schema.num_dense, schema.features.size());
  std::printf("%-28s %12.0f examples/s\n", "baseline (fill only)", baseline);
  std::printf("%-28s %12.0f examples/s  (%.2fx baseline)\n", "synthetic_ctr Read",
              synthetic, synthetic / baseline);
  if (!binary_path.empty()) {
    const int64_t n = std::min<int64_t>(examples, (*source)->num_examples());
    absl::Status written = WriteCtrBinary(**source, 0, n, binary_path, spec);
    if (!written.ok()) {
      std::cerr << written << "\n";
      return 1;
    }
    auto binary = CtrBinarySource::Open(binary_path);
    if (!binary.ok()) {
      std::cerr << binary.status() << "\n";
      return 1;
    }
    const double cold = Rate(**binary, n, static_cast<int>(batch_size), &checksum);
    const double warm = Rate(**binary, n, static_cast<int>(batch_size), &checksum);
    std::printf("%-28s %12.0f examples/s  (%.2fx baseline; first pass, page faults)\n",
                "ctrbin Read (random order)", cold, cold / baseline);
    std::printf("%-28s %12.0f examples/s  (%.2fx baseline; second pass)\n",
                "ctrbin Read (random order)", warm, warm / baseline);
    std::remove(binary_path.c_str());
  }
  std::fprintf(stderr, "(checksum %lld)\n", static_cast<long long>(checksum));
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
