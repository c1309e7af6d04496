#include "bench/tta_curve.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardps {
namespace bench {

absl::StatusOr<EvalPoint> PointFromRecord(const nlohmann::json& record, double start_time) {
  if (!record.is_object()) return absl::InvalidArgumentError("a metrics record is not an object");
  auto number = [&](const char* field, double* out) -> absl::Status {
    auto it = record.find(field);
    if (it == record.end() || !it->is_number()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics record: \"", field, "\" is missing or not a number"));
    }
    *out = it->get<double>();
    return absl::OkStatus();
  };
  double time = 0, step = 0, accuracy = 0, loss = std::numeric_limits<double>::quiet_NaN();
  for (auto [field, out] : {std::pair<const char*, double*>{"time", &time},
                            {"step", &step},
                            {"accuracy", &accuracy}}) {
    if (absl::Status s = number(field, out); !s.ok()) return s;
  }
  if (auto it = record.find("loss"); it != record.end() && it->is_number()) {
    loss = it->get<double>();
  }
  EvalPoint point;
  point.t = time - start_time;
  point.step = static_cast<int64_t>(step);
  point.accuracy = accuracy;
  point.loss = loss;
  auto final = record.find("final");
  point.final = final != record.end() && final->is_boolean() && final->get<bool>();
  return point;
}

absl::StatusOr<std::vector<EvalPoint>> ParseMetricsLines(absl::string_view text,
                                                         double start_time) {
  std::vector<EvalPoint> points;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (line.find_first_not_of(" \t\r") == absl::string_view::npos) continue;
    nlohmann::json record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_discarded()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics line ", line_number, " is not JSON: ", line.substr(0, 80)));
    }
    absl::StatusOr<EvalPoint> point = PointFromRecord(record, start_time);
    if (!point.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("metrics line ", line_number, ": ", point.status().message()));
    }
    points.push_back(*point);
  }
  std::stable_sort(points.begin(), points.end(),
                   [](const EvalPoint& a, const EvalPoint& b) { return a.t < b.t; });
  return points;
}

std::optional<double> TimeToAccuracy(const std::vector<EvalPoint>& points, double target) {
  for (size_t i = 0; i < points.size(); ++i) {
    const EvalPoint& p = points[i];
    if (p.accuracy < target) continue;
    if (i == 0) return p.t;
    const EvalPoint& before = points[i - 1];  // below the target
    const double rise = p.accuracy - before.accuracy;
    if (!(rise > 0)) return p.t;
    return before.t + (p.t - before.t) * (target - before.accuracy) / rise;
  }
  return std::nullopt;
}

std::vector<double> TargetsBelow(double quality_a, double quality_b,
                                 const std::vector<double>& margins) {
  const double lower = std::min(quality_a, quality_b);
  std::vector<double> targets;
  for (double margin : margins) {
    targets.push_back(std::floor((lower - margin) * 1e4 + 1e-9) / 1e4);
  }
  std::sort(targets.begin(), targets.end());
  return targets;
}

std::optional<double> FinalAccuracy(const std::vector<EvalPoint>& points) {
  for (auto it = points.rbegin(); it != points.rend(); ++it) {
    if (it->final) return it->accuracy;
  }
  if (points.empty()) return std::nullopt;
  return points.back().accuracy;
}

Spread Summarize(const std::vector<std::optional<double>>& values) {
  Spread s;
  s.runs = static_cast<int>(values.size());
  std::vector<double> sorted;
  for (const std::optional<double>& v : values) {
    sorted.push_back(v.has_value() ? *v : std::numeric_limits<double>::infinity());
    if (v.has_value()) ++s.present;
  }
  if (sorted.empty()) return s;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  const double median =
      n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;  // inf if either is
  if (std::isfinite(median)) s.median = median;
  if (std::isfinite(sorted.front())) s.min = sorted.front();
  if (std::isfinite(sorted.back())) s.max = sorted.back();
  return s;
}

}  // namespace bench
}  // namespace shardps
