// A small Prometheus registry: counters, gauges and histograms grouped in families whose
// series are told apart by label values (at most max_series of them a family: past that, new
// label values share one overflow series whose values all read "_other", so a client naming
// many variables cannot grow a scrape without bound), gauges read at scrape time from a
// callback, and the text exposition format (version 0.0.4) of all of them.
//
// The hot path is one relaxed atomic add on a cache line the calling thread shares with few
// others: each series keeps kStripes padded cells and a thread adds to the cell of its own
// stripe (assigned round-robin when the thread first observes). A scrape sums the stripes.
// Prometheus' own C++ client (prometheus-cpp 1.0.1) takes a mutex in every Histogram::Observe;
// bench/metrics_bench.cc measures both.
//
// Thread-safety: every method may be called from any thread. Counter, Gauge and Histogram
// pointers stay valid for the registry's life (families and series are never removed).
#ifndef SHARDPS_METRICS_REGISTRY_H_
#define SHARDPS_METRICS_REGISTRY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace shardps {
namespace metrics {

inline constexpr int kStripes = 16;

// The stripe of the calling thread, in [0, kStripes).
int ThreadStripe();

// A monotonic count (a Prometheus counter; its family's name ends in _total).
class Counter {
 public:
  void Add(uint64_t n = 1) {
    cells_[ThreadStripe()].value.fetch_add(n, std::memory_order_relaxed);
  }
  uint64_t Value() const;

 private:
  struct alignas(64) Cell {
    std::atomic<uint64_t> value{0};
  };
  Cell cells_[kStripes];
};

// A value that goes up and down (set by the owner; read at scrape).
class Gauge {
 public:
  void Set(double value) { value_.store(value, std::memory_order_relaxed); }
  void Add(double delta);
  double Value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// A distribution over fixed upper bounds (cumulative at exposition, as Prometheus wants).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bucket, not cumulative; the last is +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  struct alignas(64) Stripe {
    std::unique_ptr<std::atomic<uint64_t>[]> counts;  // bounds.size() + 1
    std::atomic<double> sum{0};
  };
  const std::vector<double> bounds_;
  Stripe stripes_[kStripes];
};

// Bucket bounds: `count` bounds from `start`, each `factor` times the last.
std::vector<double> ExponentialBuckets(double start, double factor, int count);
// Latency buckets in seconds, 50 us to about 13 s.
std::vector<double> LatencyBuckets();

enum class Type { kCounter, kGauge, kHistogram };

// What a scrape-time callback writes: one sample of the family it was registered for.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void Add(const std::vector<std::string>& label_values, double value) = 0;
};

class Registry {
 public:
  struct FamilyData;  // in registry.cc

  static constexpr size_t kDefaultMaxSeries = 1000;

  // A family of `name` with `label_names` (the series' label values come in the same order).
  // INVALID_ARGUMENT for a name or label name that Prometheus does not take, a counter whose
  // name does not end in _total, or a name already registered with another type or labels;
  // the same name, type and labels again return the family registered first.
  template <typename T>
  class Family {
   public:
    // The series of `label_values` (as many as the family's label names; else the overflow
    // series). Takes a mutex: look a series up once and keep the pointer.
    T* With(const std::vector<std::string>& label_values);

   private:
    friend class Registry;
    explicit Family(FamilyData* data) : data_(data) {}
    FamilyData* data_;
  };

  absl::StatusOr<Family<Counter>> AddCounter(const std::string& name, const std::string& help,
                                             std::vector<std::string> label_names,
                                             size_t max_series = kDefaultMaxSeries);
  absl::StatusOr<Family<Gauge>> AddGauge(const std::string& name, const std::string& help,
                                         std::vector<std::string> label_names,
                                         size_t max_series = kDefaultMaxSeries);
  absl::StatusOr<Family<Histogram>> AddHistogram(const std::string& name, const std::string& help,
                                                 std::vector<std::string> label_names,
                                                 std::vector<double> bounds,
                                                 size_t max_series = kDefaultMaxSeries);
  // A gauge family whose samples `collect` writes at each scrape (at most max_series of them;
  // the rest are dropped). `collect` runs on the scraping thread, with no registry lock held.
  absl::Status AddCallbackGauge(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names,
                                std::function<void(Sink*)> collect,
                                size_t max_series = kDefaultMaxSeries);

  // `before` runs at the start of each Render, before any callback family: a source read by
  // several families takes one snapshot there (all of a scrape's samples then agree).
  void AddScrapeHook(std::function<void()> before);

  // Every family in the text exposition format, sorted by name.
  std::string Render() const;

  Registry();
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

 private:
  absl::StatusOr<FamilyData*> Add(const std::string& name, const std::string& help, Type type,
                                  std::vector<std::string> label_names, std::vector<double> bounds,
                                  size_t max_series, std::function<void(Sink*)> collect);

  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<FamilyData>> families_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void()>> hooks_ ABSL_GUARDED_BY(mu_);
};

template <>
Counter* Registry::Family<Counter>::With(const std::vector<std::string>& label_values);
template <>
Gauge* Registry::Family<Gauge>::With(const std::vector<std::string>& label_values);
template <>
Histogram* Registry::Family<Histogram>::With(const std::vector<std::string>& label_values);

// Whether `name` is a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*) and label name.
bool ValidMetricName(const std::string& name);
bool ValidLabelName(const std::string& name);
// A label value escaped for the text format (\\, \", \n).
std::string EscapeLabelValue(const std::string& value);
// A sample value as the text format writes it (+Inf, -Inf, NaN, or the shortest round trip).
std::string FormatValue(double value);

}  // namespace metrics
}  // namespace shardps

#endif  // SHARDPS_METRICS_REGISTRY_H_
