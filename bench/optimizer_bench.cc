// optimizer_bench: what a dense optimizer update costs on this machine, against the memory
// floor of the same update: a loop that streams exactly the same arrays (gradient read;
// parameters and each slot read and written) with one addition per element. An update near
// its floor is bound by memory bandwidth, not arithmetic: it cannot get much faster in place.
//
// Sizes: a 16 MiB variable (4 Mi floats) as the transport benchmark pushes it, split over two
// threads the way two ps daemons apply their halves at once; and a 1 MiB one (in cache).
//
// Rows: the row-sparse update of 65 536 distinct random rows of 64 floats (16 MiB of
// gradient, as the transport benchmark's PushRows) in a table of 2^20 rows (256 MiB of
// parameters, and as much per slot), one thread, against the dense update of the same
// 16 MiB: what a row costs beyond its bytes (each row a cache miss).
//
// The finiteness check (issue 23 §5): the ps runs Optimizer::FirstNonFiniteDense/Rows over
// every update before applying it, so that an update that would overflow a parameter or slot
// is refused; each figure also times the check followed by the update on the same arrays, as
// the ps runs them, in the same run ("checked ns": per float or row; "+check": checked /
// update).
//
//   bazel run //bench:optimizer_bench -- [--json] [--reps N]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/types/span.h"
#include "bench/host_stats.h"
#include "bench/stats.h"
#include "common/flags.h"
#include "math/optimizer.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace {

struct Arrays {
  explicit Arrays(int64_t n, int slots)
      : grad(n, 1e-3f), params(n, 0.5f), slot(slots, std::vector<float>(n, 0.1f)) {}
  std::vector<float> grad, params;
  std::vector<std::vector<float>> slot;
};

// The memory floor: the same streams as an update with `slots` slots, one add per element.
void Floor(int slots, Arrays& a) {
  const int64_t n = static_cast<int64_t>(a.grad.size());
  const float* __restrict g = a.grad.data();
  float* __restrict p = a.params.data();
  for (int64_t i = 0; i < n; ++i) p[i] += g[i];
  for (int s = 0; s < slots; ++s) {
    float* __restrict m = a.slot[s].data();
    for (int64_t i = 0; i < n; ++i) m[i] += g[i];
  }
}

// Fused floor: one pass over all streams (as a fused optimizer kernel reads them).
void FusedFloor(int slots, Arrays& a) {
  const int64_t n = static_cast<int64_t>(a.grad.size());
  const float* __restrict g = a.grad.data();
  float* __restrict p = a.params.data();
  float* __restrict m = slots > 0 ? a.slot[0].data() : nullptr;
  float* __restrict v = slots > 1 ? a.slot[1].data() : nullptr;
  if (slots == 2) {
    for (int64_t i = 0; i < n; ++i) {
      p[i] += g[i];
      m[i] += g[i];
      v[i] += g[i];
    }
  } else if (slots == 1) {
    for (int64_t i = 0; i < n; ++i) {
      p[i] += g[i];
      m[i] += g[i];
    }
  } else {
    for (int64_t i = 0; i < n; ++i) p[i] += g[i];
  }
}

absl::StatusOr<std::unique_ptr<Optimizer>> MakeOptimizer(OptimizerSpec::Type type) {
  OptimizerSpec spec;
  spec.set_type(type);
  spec.set_learning_rate(1e-3);
  return Optimizer::Create(spec);
}

// Seconds for `threads` threads each running fn on its own arrays, median of `reps`.
template <typename Fn>
double Time(std::vector<Arrays>& arrays, int reps, Fn fn) {
  std::vector<double> samples;
  for (int r = 0; r < reps + 1; ++r) {
    const auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> threads;
    for (size_t t = 1; t < arrays.size(); ++t) threads.emplace_back([&, t] { fn(arrays[t]); });
    fn(arrays[0]);
    for (std::thread& t : threads) t.join();
    const double s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (r > 0) samples.push_back(s);  // the first run faults the pages in
  }
  return bench::Median(samples);
}

struct Case {
  const char* name;
  OptimizerSpec::Type type;
};
constexpr Case kCases[] = {{"noop", OptimizerSpec::NOOP},         {"sgd", OptimizerSpec::SGD},
                           {"momentum", OptimizerSpec::MOMENTUM}, {"adagrad", OptimizerSpec::ADAGRAD},
                           {"adam", OptimizerSpec::ADAM},         {"ftrl", OptimizerSpec::FTRL}};

// Every optimizer's dense update at each size against its floors (the table on stderr).
absl::StatusOr<nlohmann::json> DenseFigures(int reps) {
  struct Size {
    const char* name;
    int64_t floats;  // in all
    int threads;
  };
  const Size sizes[] = {{"16MiB_2threads", int64_t{4} << 20, 2}, {"1MiB_1thread", 1 << 18, 1}};
  nlohmann::json out = nlohmann::json::array();
  std::fprintf(stderr, "%-10s %-16s %10s %10s %10s %8s %10s %8s\n", "optimizer", "size",
               "ns/float", "floor ns", "GB/s", "vs floor", "checked ns", "+check");
  for (const Size& size : sizes) {
    for (const Case& c : kCases) {
      auto opt = MakeOptimizer(c.type);
      if (!opt.ok()) return opt.status();
      const int slots = (*opt)->num_slots();
      std::vector<Arrays> arrays;
      for (int t = 0; t < size.threads; ++t) arrays.emplace_back(size.floats / size.threads, slots);
      int64_t step = 0;
      const double update = Time(arrays, reps, [&](Arrays& a) {
        std::vector<float*> s;
        for (auto& v : a.slot) s.push_back(v.data());
        (*opt)->ApplyDense(++step, a.grad, a.params.data(), s);
      });
      int64_t bad = 0;
      const double checked = Time(arrays, reps, [&](Arrays& a) {
        std::vector<float*> s;
        for (auto& v : a.slot) s.push_back(v.data());
        const std::vector<const float*> cs(s.begin(), s.end());
        ++step;
        bad += (*opt)->FirstNonFiniteDense(step, 1.0, a.grad, a.params.data(), cs) !=
               static_cast<int64_t>(a.grad.size());
        (*opt)->ApplyDense(step, a.grad, a.params.data(), s);
      });
      if (bad != 0) return absl::InternalError("the finiteness check refused a finite update");
      const double floor = Time(arrays, reps, [&](Arrays& a) { FusedFloor(slots, a); });
      const double separate = Time(arrays, reps, [&](Arrays& a) { Floor(slots, a); });
      const double n = static_cast<double>(size.floats);
      const double bytes = n * 4.0 * (1 + 2 * (1 + slots));  // grad; params and slots r+w
      std::fprintf(stderr, "%-10s %-16s %10.3f %10.3f %10.1f %8.2f %10.3f %8.2f\n", c.name,
                   size.name, update / n * 1e9, floor / n * 1e9, bytes / update / 1e9,
                   update / floor, checked / n * 1e9, checked / update);
      out.push_back({{"optimizer", c.name},
                     {"size", size.name},
                     {"floats", size.floats},
                     {"threads", size.threads},
                     {"update_s", update},
                     {"fused_floor_s", floor},
                     {"separate_floor_s", separate},
                     {"bytes_streamed", bytes},
                     {"update_gb_per_s", bytes / update / 1e9},
                     {"update_vs_floor", update / floor},
                     {"checked_update_s", checked},
                     {"checked_ns_per_float", checked / n * 1e9},
                     {"checked_vs_update", checked / update}});
    }
  }
  return out;
}

// The row-sparse update of SGD, Adagrad and Adam against the dense update of as many bytes.
absl::StatusOr<nlohmann::json> RowFigures(int reps) {
  constexpr int64_t kTableRows = int64_t{1} << 20, kWidth = 64, kIds = 65536;
  std::fprintf(stderr, "\n%-10s %-24s %12s %12s %10s %12s %8s\n", "optimizer", "rows",
               "ns/row", "dense ns/row", "vs dense", "checked ns", "+check");
  nlohmann::json rows_out = nlohmann::json::array();
  std::mt19937_64 rng(1);
  std::vector<int64_t> ids(kTableRows);
  for (int64_t i = 0; i < kTableRows; ++i) ids[i] = i;
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(kIds);
  for (const Case& c : kCases) {
    if (c.type != OptimizerSpec::SGD && c.type != OptimizerSpec::ADAGRAD &&
        c.type != OptimizerSpec::ADAM) {
      continue;
    }
    auto opt = MakeOptimizer(c.type);
    if (!opt.ok()) return opt.status();
    const int slots = (*opt)->num_slots();
    Arrays table(kTableRows * kWidth, slots);
    std::vector<Arrays> dense;
    dense.emplace_back(kIds * kWidth, slots);
    std::vector<float> grad(kIds * kWidth, 1e-3f);
    int64_t step = 0;
    std::vector<Arrays> one;  // Time() runs fn once per element: a placeholder
    one.emplace_back(1, 0);
    const double sparse = Time(one, reps, [&](Arrays&) {
      float* const param_base = table.params.data();
      float* slot_base[Optimizer::kMaxSlots] = {};
      RowBlocks slot_blocks[Optimizer::kMaxSlots] = {};
      for (int j = 0; j < slots; ++j) {
        slot_base[j] = table.slot[j].data();
        slot_blocks[j] = RowBlocks::Contiguous(&slot_base[j], kWidth);
      }
      (*opt)->ApplyRowsScaled(++step, 1.0, ids, grad.data(),
                              RowBlocks::Contiguous(&param_base, kWidth),
                              absl::MakeConstSpan(slot_blocks, slots));
    });
    int64_t bad = 0;
    const double checked = Time(one, reps, [&](Arrays&) {
      float* const param_base = table.params.data();
      float* slot_base[Optimizer::kMaxSlots] = {};
      RowBlocks slot_blocks[Optimizer::kMaxSlots] = {};
      for (int j = 0; j < slots; ++j) {
        slot_base[j] = table.slot[j].data();
        slot_blocks[j] = RowBlocks::Contiguous(&slot_base[j], kWidth);
      }
      ++step;
      bad += (*opt)->FirstNonFiniteRows(step, 1.0, ids, grad.data(),
                                        RowBlocks::Contiguous(&param_base, kWidth),
                                        absl::MakeConstSpan(slot_blocks, slots)) !=
             kIds * kWidth;
      (*opt)->ApplyRowsScaled(step, 1.0, ids, grad.data(),
                              RowBlocks::Contiguous(&param_base, kWidth),
                              absl::MakeConstSpan(slot_blocks, slots));
    });
    if (bad != 0) return absl::InternalError("the finiteness check refused a finite update");
    const double contiguous = Time(dense, reps, [&](Arrays& a) {
      std::vector<float*> s;
      for (auto& v : a.slot) s.push_back(v.data());
      (*opt)->ApplyDense(++step, a.grad, a.params.data(), s);
    });
    std::fprintf(stderr, "%-10s %-24s %12.1f %12.1f %10.2f %12.1f %8.2f\n", c.name,
                 "65536 of 2^20 x 64", sparse / kIds * 1e9, contiguous / kIds * 1e9,
                 sparse / contiguous, checked / kIds * 1e9, checked / sparse);
    rows_out.push_back({{"optimizer", c.name},
                        {"table_rows", kTableRows},
                        {"width", kWidth},
                        {"ids", kIds},
                        {"rows_s", sparse},
                        {"dense_s", contiguous},
                        {"rows_vs_dense", sparse / contiguous},
                        {"checked_rows_s", checked},
                        {"checked_vs_rows", checked / sparse}});
  }
  return rows_out;
}

int Main(int argc, char** argv) {
  bool json = false;
  int64_t reps_flag = 20;
  FlagParser flags("optimizer_bench", "Dense optimizer updates against their memory floor.");
  flags.AddBool("json", &json, "print one JSON object on stdout (the table on stderr)");
  flags.AddInt("reps", &reps_flag, "timed repetitions per figure");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  const int reps = static_cast<int>(std::clamp<int64_t>(reps_flag, 1, 1000));
  const bench::HostRun host_run;
  absl::StatusOr<nlohmann::json> out = DenseFigures(reps);
  if (!out.ok()) {
    std::cerr << out.status() << "\n";
    return 1;
  }
  absl::StatusOr<nlohmann::json> rows_out = RowFigures(reps);
  if (!rows_out.ok()) {
    std::cerr << rows_out.status() << "\n";
    return 1;
  }
  const bench::HostStats host = host_run.Stop();
  std::fprintf(stderr, "\nhost during the run (bench/host_stats.h): %s\n", host.Line().c_str());
  if (json) {
    nlohmann::json host_json = {{"load_average_1m_before", host.load_before},
                                {"load_average_1m_after", host.load_after},
                                {"others_cores", host.others_cores()},
                                {"busy", host.busy()}};
    std::cout << nlohmann::json{{"reps", reps}, {"figures", *out}, {"rows", *rows_out},
                                {"host", host_json}}
                     .dump(2)
              << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
