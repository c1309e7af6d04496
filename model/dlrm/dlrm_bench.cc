// Examples/s of DlrmCompute::ForwardBackward on a Criteo-like shape: 13 dense features, 26
// one-hot tables of dim 16, batch 1024, each table's ids drawn from a Zipf-like power law over
// its unique rows. Two model sizes: a small one (bottom 64,16; top 64,32) and DLRM's Criteo
// configuration (bottom 512,256,64,16; top 512,256), both with dot interactions, and the
// small one with concat. A benchmark, not a test: it prints, it asserts nothing.
//
//   bazel run //model/dlrm:dlrm_bench -- --threads=0 --seconds=2 [--backend=cpu|gpu|auto]
// (.bazelrc builds with -O2 -mavx2 -mfma.)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "model/dlrm/dlrm_compute.h"

ABSL_FLAG(int, threads, 0, "CPU threads; 0: one per hardware thread, and 1 as well");
ABSL_FLAG(double, seconds, 2.0, "time per configuration");
ABSL_FLAG(int, batch, 1024, "examples per batch");
ABSL_FLAG(std::string, backend, "cpu", "cpu, gpu or auto");

namespace shardps {
namespace {

struct Data {
  std::vector<std::vector<float>> params;
  std::vector<float> dense, labels;
  std::vector<std::vector<float>> rows;
  std::vector<std::vector<int32_t>> offsets, positions;
};

Data MakeData(const DlrmSpec& spec, int batch, std::mt19937* gen) {
  Data d;
  std::uniform_real_distribution<float> u(-0.05f, 0.05f);
  for (const DlrmParamInfo& p : DlrmDenseParams(spec)) {
    std::vector<float> v(p.num_elements());
    for (float& x : v) x = u(*gen);
    d.params.push_back(std::move(v));
  }
  d.dense.resize(static_cast<size_t>(batch) * spec.num_dense);
  for (float& x : d.dense) x = u(*gen) * 20;
  for (int i = 0; i < batch; ++i) d.labels.push_back(i % 4 == 0 ? 1.0f : 0.0f);
  // Power-law ids over 100000 candidates: a batch of 1024 then has a few hundred unique rows.
  std::vector<double> weights(100000);
  for (size_t k = 0; k < weights.size(); ++k) weights[k] = 1.0 / std::pow(k + 1.0, 1.1);
  std::discrete_distribution<int> zipf(weights.begin(), weights.end());
  for (const DlrmTableSpec& t : spec.tables) {
    std::vector<int> seen(weights.size(), -1);
    std::vector<int32_t> off = {0}, pos;
    int unique = 0;
    for (int i = 0; i < batch; ++i) {
      const int id = zipf(*gen);
      if (seen[id] < 0) seen[id] = unique++;
      pos.push_back(seen[id]);
      off.push_back(static_cast<int32_t>(pos.size()));
    }
    std::vector<float> r(static_cast<size_t>(unique) * t.dim);
    for (float& x : r) x = u(*gen);
    d.rows.push_back(std::move(r));
    d.offsets.push_back(std::move(off));
    d.positions.push_back(std::move(pos));
  }
  return d;
}

void Bench(DlrmCompute* compute, const std::string& text, int batch, double seconds) {
  std::vector<DlrmTableSchema> tables;
  for (int i = 1; i <= 26; ++i) tables.push_back({"C" + std::to_string(i), 0});
  auto spec = ParseDlrmSpec(text, 13, tables);
  if (!spec.ok()) {
    std::cerr << spec.status() << "\n";
    std::exit(1);
  }
  std::mt19937 gen(1);
  const Data d = MakeData(*spec, batch, &gen);
  std::vector<absl::Span<const float>> params(d.params.begin(), d.params.end());
  DlrmBatch b;
  b.batch = batch;
  b.dense = d.dense;
  b.labels = d.labels;
  int64_t unique = 0;
  for (size_t t = 0; t < spec->tables.size(); ++t) {
    b.tables.push_back({d.rows[t], static_cast<int64_t>(d.rows[t].size() / 16), d.offsets[t],
                        d.positions[t]});
    unique += b.tables.back().num_rows;
  }
  DlrmStepOutput out;
  for (int i = 0; i < 3; ++i) {
    if (absl::Status s = compute->ForwardBackward(*spec, params, b, &out); !s.ok()) {
      std::cerr << s << "\n";
      std::exit(1);
    }
  }
  int64_t steps = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    (void)compute->ForwardBackward(*spec, params, b, &out);
    ++steps;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  int64_t num_params = 0;
  for (const auto& p : d.params) num_params += static_cast<int64_t>(p.size());
  std::printf("%-28s %-72s dense params %7lld, unique rows/batch %5lld: %9.0f examples/s "
              "(%.2f ms/batch, %lld steps)\n",
              compute->Name().c_str(), text.c_str(), static_cast<long long>(num_params),
              static_cast<long long>(unique), steps * batch / elapsed, 1e3 * elapsed / steps,
              static_cast<long long>(steps));
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int batch = absl::GetFlag(FLAGS_batch);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  auto kind = shardps::ParseBackendKind(absl::GetFlag(FLAGS_backend));
  if (!kind.ok()) {
    std::cerr << kind.status() << "\n";
    return 1;
  }
  int threads = absl::GetFlag(FLAGS_threads);
  std::vector<int> thread_counts = {threads};
  if (threads <= 0) {
    threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    thread_counts = {1};
    if (threads > 1) thread_counts.push_back(threads);
  }
  if (*kind != shardps::BackendKind::kCpu) thread_counts = {threads};
  std::printf("DlrmCompute::ForwardBackward, 13 dense + 26 tables x dim 16, batch %d\n", batch);
  for (int t : thread_counts) {
    auto compute = shardps::CreateDlrmCompute(*kind, t);
    if (!compute.ok()) {
      std::cerr << compute.status() << "\n";
      return 1;
    }
    for (const char* text :
         {"dlrm:bottom=64,16;top=64,32;interaction=dot;pooling=sum;dim=16",
          "dlrm:bottom=64,16;top=64,32;interaction=concat;pooling=sum;dim=16",
          "dlrm:bottom=512,256,64,16;top=512,256;interaction=dot;pooling=sum;dim=16"}) {
      shardps::Bench(compute->get(), text, batch, seconds);
    }
  }
  return 0;
}
