// Registry: see registry.h.
#include "metrics/registry.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardps {
namespace metrics {

int ThreadStripe() {
  static std::atomic<int> next{0};
  thread_local const int stripe = next.fetch_add(1, std::memory_order_relaxed) % kStripes;
  return stripe;
}

namespace {

void AtomicAdd(std::atomic<double>* target, double delta) {
  double old = target->load(std::memory_order_relaxed);
  while (!target->compare_exchange_weak(old, old + delta, std::memory_order_relaxed)) {
  }
}

}  // namespace

uint64_t Counter::Value() const {
  uint64_t total = 0;
  for (const Cell& cell : cells_) total += cell.value.load(std::memory_order_relaxed);
  return total;
}

void Gauge::Add(double delta) { AtomicAdd(&value_, delta); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)) {
  for (Stripe& stripe : stripes_) {
    stripe.counts.reset(new std::atomic<uint64_t>[bounds_.size() + 1]);
    for (size_t i = 0; i <= bounds_.size(); ++i) stripe.counts[i].store(0);
  }
}

void Histogram::Observe(double value) {
  // The first bound at or above the value: Prometheus' buckets are "le" (less or equal).
  const size_t bucket =
      std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  Stripe& stripe = stripes_[ThreadStripe()];
  stripe.counts[bucket].fetch_add(1, std::memory_order_relaxed);
  AtomicAdd(&stripe.sum, value);
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot snapshot;
  snapshot.bounds = bounds_;
  snapshot.counts.assign(bounds_.size() + 1, 0);
  for (const Stripe& stripe : stripes_) {
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      snapshot.counts[i] += stripe.counts[i].load(std::memory_order_relaxed);
    }
    snapshot.sum += stripe.sum.load(std::memory_order_relaxed);
  }
  for (uint64_t count : snapshot.counts) snapshot.count += count;
  return snapshot;
}

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double bound = start;
  for (int i = 0; i < count; ++i, bound *= factor) bounds.push_back(bound);
  return bounds;
}

std::vector<double> LatencyBuckets() { return ExponentialBuckets(50e-6, 2, 19); }

bool ValidMetricName(const std::string& name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

bool ValidLabelName(const std::string& name) {
  return ValidMetricName(name) && name.find(':') == std::string::npos &&
         name.rfind("__", 0) != 0 && name != "le";
}

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  for (int precision = 15; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  return buffer;
}

struct Registry::FamilyData {
  std::string name;
  std::string help;
  Type type;
  std::vector<std::string> label_names;
  std::vector<double> bounds;
  size_t max_series;
  std::function<void(Sink*)> collect;

  absl::Mutex mu;
  std::map<std::vector<std::string>, std::unique_ptr<Counter>> counters ABSL_GUARDED_BY(mu);
  std::map<std::vector<std::string>, std::unique_ptr<Gauge>> gauges ABSL_GUARDED_BY(mu);
  std::map<std::vector<std::string>, std::unique_ptr<Histogram>> histograms ABSL_GUARDED_BY(mu);

  // The key a series of `values` is kept under: the values, or the overflow key once the
  // family holds max_series (or the values are the wrong number).
  std::vector<std::string> KeyFor(const std::vector<std::string>& values, size_t held) const {
    if (values.size() == label_names.size() && held < max_series) return values;
    return std::vector<std::string>(label_names.size(), "_other");
  }
};

namespace {

template <typename T>
T* FindOrAdd(std::map<std::vector<std::string>, std::unique_ptr<T>>* series,
             const Registry::FamilyData& family, const std::vector<std::string>& values,
             const std::function<std::unique_ptr<T>()>& make) {
  auto it = series->find(values);
  if (it != series->end()) return it->second.get();
  std::vector<std::string> key = family.KeyFor(values, series->size());
  std::unique_ptr<T>& slot = (*series)[key];
  if (slot == nullptr) slot = make();
  return slot.get();
}

// `{a="x",b="y"}` (with `extra` appended, for a histogram's le), or "" with no labels.
std::string LabelText(const std::vector<std::string>& names,
                      const std::vector<std::string>& values, const std::string& extra = "") {
  std::vector<std::string> parts;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    parts.push_back(absl::StrCat(names[i], "=\"", EscapeLabelValue(values[i]), "\""));
  }
  if (!extra.empty()) parts.push_back(extra);
  if (parts.empty()) return "";
  return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
}

class CollectSink : public Sink {
 public:
  CollectSink(const Registry::FamilyData& family, std::string* out)
      : family_(family), out_(out) {}
  void Add(const std::vector<std::string>& label_values, double value) override {
    if (added_ >= family_.max_series || label_values.size() != family_.label_names.size()) {
      return;
    }
    ++added_;
    absl::StrAppend(out_, family_.name, LabelText(family_.label_names, label_values), " ",
                    FormatValue(value), "\n");
  }

 private:
  const Registry::FamilyData& family_;
  std::string* out_;
  size_t added_ = 0;
};

}  // namespace

template <>
Counter* Registry::Family<Counter>::With(const std::vector<std::string>& label_values) {
  absl::MutexLock lock(&data_->mu);
  return FindOrAdd<Counter>(&data_->counters, *data_, label_values,
                            [] { return std::make_unique<Counter>(); });
}

template <>
Gauge* Registry::Family<Gauge>::With(const std::vector<std::string>& label_values) {
  absl::MutexLock lock(&data_->mu);
  return FindOrAdd<Gauge>(&data_->gauges, *data_, label_values,
                          [] { return std::make_unique<Gauge>(); });
}

template <>
Histogram* Registry::Family<Histogram>::With(const std::vector<std::string>& label_values) {
  absl::MutexLock lock(&data_->mu);
  const std::vector<double>& bounds = data_->bounds;
  return FindOrAdd<Histogram>(&data_->histograms, *data_, label_values,
                              [&bounds] { return std::make_unique<Histogram>(bounds); });
}

Registry::Registry() = default;
Registry::~Registry() = default;

absl::StatusOr<Registry::FamilyData*> Registry::Add(const std::string& name,
                                                    const std::string& help, Type type,
                                                    std::vector<std::string> label_names,
                                                    std::vector<double> bounds,
                                                    size_t max_series,
                                                    std::function<void(Sink*)> collect) {
  if (!ValidMetricName(name)) {
    return absl::InvalidArgumentError(absl::StrCat("metric name \"", name, "\" is not valid"));
  }
  const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
  if ((type == Type::kCounter) != total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metric ", name, ": counters, and only counters, have names ending in _total"));
  }
  for (const std::string& label : label_names) {
    if (!ValidLabelName(label)) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, ": label name \"", label, "\" is not valid"));
    }
  }
  if (type == Type::kHistogram &&
      (bounds.empty() || !std::is_sorted(bounds.begin(), bounds.end()) ||
       std::adjacent_find(bounds.begin(), bounds.end()) != bounds.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("histogram ", name, ": bounds must be increasing and not empty"));
  }
  absl::MutexLock lock(&mu_);
  auto it = families_.find(name);
  if (it != families_.end()) {
    FamilyData& family = *it->second;
    if (family.type != type || family.label_names != label_names || family.collect ||
        collect) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", name, " is already registered with another type or labels"));
    }
    return &family;
  }
  auto family = std::make_unique<FamilyData>();
  family->name = name;
  family->help = help;
  family->type = type;
  family->label_names = std::move(label_names);
  family->bounds = std::move(bounds);
  family->max_series = std::max<size_t>(max_series, 1);
  family->collect = std::move(collect);
  FamilyData* data = family.get();
  families_[name] = std::move(family);
  return data;
}

absl::StatusOr<Registry::Family<Counter>> Registry::AddCounter(
    const std::string& name, const std::string& help, std::vector<std::string> label_names,
    size_t max_series) {
  absl::StatusOr<FamilyData*> data =
      Add(name, help, Type::kCounter, std::move(label_names), {}, max_series, nullptr);
  if (!data.ok()) return data.status();
  return Family<Counter>(*data);
}

absl::StatusOr<Registry::Family<Gauge>> Registry::AddGauge(const std::string& name,
                                                           const std::string& help,
                                                           std::vector<std::string> label_names,
                                                           size_t max_series) {
  absl::StatusOr<FamilyData*> data =
      Add(name, help, Type::kGauge, std::move(label_names), {}, max_series, nullptr);
  if (!data.ok()) return data.status();
  return Family<Gauge>(*data);
}

absl::StatusOr<Registry::Family<Histogram>> Registry::AddHistogram(
    const std::string& name, const std::string& help, std::vector<std::string> label_names,
    std::vector<double> bounds, size_t max_series) {
  absl::StatusOr<FamilyData*> data = Add(name, help, Type::kHistogram, std::move(label_names),
                                         std::move(bounds), max_series, nullptr);
  if (!data.ok()) return data.status();
  return Family<Histogram>(*data);
}

absl::Status Registry::AddCallbackGauge(const std::string& name, const std::string& help,
                                        std::vector<std::string> label_names,
                                        std::function<void(Sink*)> collect,
                                        size_t max_series) {
  return Add(name, help, Type::kGauge, std::move(label_names), {}, max_series,
             std::move(collect))
      .status();
}

void Registry::AddScrapeHook(std::function<void()> before) {
  absl::MutexLock lock(&mu_);
  hooks_.push_back(std::move(before));
}

std::string Registry::Render() const {
  std::vector<FamilyData*> families;
  std::vector<std::function<void()>> hooks;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, family] : families_) families.push_back(family.get());
    hooks = hooks_;
  }
  for (const std::function<void()>& hook : hooks) hook();
  std::string out;
  for (FamilyData* family : families) {
    std::string help;
    for (char c : family->help) help += c == '\n' ? std::string("\\n") : std::string(1, c);
    const char* type = family->type == Type::kCounter   ? "counter"
                       : family->type == Type::kGauge ? "gauge"
                                                        : "histogram";
    absl::StrAppend(&out, "# HELP ", family->name, " ", help, "\n# TYPE ", family->name, " ",
                    type, "\n");
    if (family->collect) {
      CollectSink sink(*family, &out);
      family->collect(&sink);
      continue;
    }
    absl::MutexLock lock(&family->mu);
    for (const auto& [values, counter] : family->counters) {
      absl::StrAppend(&out, family->name, LabelText(family->label_names, values), " ",
                      counter->Value(), "\n");
    }
    for (const auto& [values, gauge] : family->gauges) {
      absl::StrAppend(&out, family->name, LabelText(family->label_names, values), " ",
                      FormatValue(gauge->Value()), "\n");
    }
    for (const auto& [values, histogram] : family->histograms) {
      const Histogram::Snapshot snapshot = histogram->Read();
      uint64_t cumulative = 0;
      for (size_t i = 0; i < snapshot.counts.size(); ++i) {
        cumulative += snapshot.counts[i];
        const std::string le = i < snapshot.bounds.size() ? FormatValue(snapshot.bounds[i])
                                                          : std::string("+Inf");
        absl::StrAppend(&out, family->name, "_bucket",
                        LabelText(family->label_names, values, absl::StrCat("le=\"", le, "\"")),
                        " ", cumulative, "\n");
      }
      const std::string labels = LabelText(family->label_names, values);
      absl::StrAppend(&out, family->name, "_sum", labels, " ", FormatValue(snapshot.sum), "\n",
                      family->name, "_count", labels, " ", cumulative, "\n");
    }
  }
  return out;
}

}  // namespace metrics
}  // namespace shardps
