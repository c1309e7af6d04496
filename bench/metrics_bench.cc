// metrics_bench: what one observation costs, prometheus-cpp 1.0.1's (a mutex in every
// Histogram::Observe, a CAS loop in Counter::Increment) against metrics/registry.h's (a relaxed
// add on the calling thread's stripe), on 1 and 2 threads observing the same series, each
// against a same-run baseline: an empty loop with the same clock reads.
//
//   bazel run -c opt //bench:metrics_bench -- [--observations=N] [--rounds=R]
//
// Prints ns per observation (median of the rounds, and min-max) per case.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bench/stats.h"
#include "common/flags.h"
#include "metrics/registry.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"

namespace shardps {
namespace {

// Runs `observe` `n` times on each of `threads` threads at once; returns ns per observation
// (wall time of the slowest thread / n).
double NsPerObservation(int threads, int64_t n, const std::function<void(int64_t)>& observe) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> ns(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      const auto start = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < n; ++i) observe(i);
      ns[t] = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                  .count();
    });
  }
  while (ready.load() < threads) {
  }
  go.store(true);
  for (std::thread& thread : pool) thread.join();
  return *std::max_element(ns.begin(), ns.end()) / static_cast<double>(n);
}

int Main(int argc, char** argv) {
  int64_t observations = 2'000'000;
  int64_t rounds = 7;
  FlagParser flags("metrics_bench", "ns per metrics observation");
  flags.AddInt("observations", &observations, "observations per thread per round", {1, 1LL << 40});
  flags.AddInt("rounds", &rounds, "rounds per case", {1, 1000});
  if (int rc = HandleParseResult(flags, flags.Parse(argc, argv)); rc >= 0) return rc;

  const std::vector<double> bounds = metrics::LatencyBuckets();
  prometheus::Histogram prom_histogram{prometheus::Histogram::BucketBoundaries(bounds)};
  prometheus::Counter prom_counter;
  metrics::Histogram our_histogram(bounds);
  metrics::Counter our_counter;
  std::atomic<int64_t> sink{0};

  struct Case {
    const char* name;
    std::function<void(int64_t)> observe;
  };
  // Values spread over the buckets as latencies would be (50 us to 13 s).
  auto value = [](int64_t i) { return 1e-4 * static_cast<double>((i * 2654435761u) % 100000); };
  const std::vector<Case> cases = {
      {"baseline (loop only)", [&](int64_t i) { sink.store(i, std::memory_order_relaxed); }},
      {"prometheus-cpp Histogram::Observe", [&](int64_t i) { prom_histogram.Observe(value(i)); }},
      {"shardps metrics::Histogram::Observe", [&](int64_t i) { our_histogram.Observe(value(i)); }},
      {"prometheus-cpp Counter::Increment", [&](int64_t) { prom_counter.Increment(); }},
      {"shardps metrics::Counter::Add", [&](int64_t) { our_counter.Add(); }},
  };
  std::printf("%-38s %8s %10s %10s %10s\n", "case", "threads", "median_ns", "min_ns", "max_ns");
  for (int threads : {1, 2}) {
    for (const Case& c : cases) {
      std::vector<double> samples;
      for (int64_t r = 0; r < rounds; ++r) {
        samples.push_back(NsPerObservation(threads, observations, c.observe));
      }
      std::printf("%-38s %8d %10.2f %10.2f %10.2f\n", c.name, threads, bench::Median(samples),
                  *std::min_element(samples.begin(), samples.end()),
                  *std::max_element(samples.begin(), samples.end()));
    }
  }
  std::printf("hardware threads: %u\n", std::thread::hardware_concurrency());
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) { return shardps::Main(argc, argv); }
