// Time to accuracy: what bench/time_to_accuracy reads from one training run's evaluations
// (an evaluator's metrics file, evaluator/metrics_file.h, written the same way by shardps'
// evaluator daemon and by the TensorFlow peer's, bench/tf_peer/numpy_eval.py) and how the runs
// of one configuration are summarized (median and spread, with "never" for a target a run did
// not reach).
//
// Thread-safety: pure functions and plain data.
#ifndef SHARDPS_BENCH_TTA_CURVE_H_
#define SHARDPS_BENCH_TTA_CURVE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace shardps {
namespace bench {

// One evaluation of the full test set.
struct EvalPoint {
  double t = 0;  // seconds on the run's clock (the record's time less the clock's start)
  int64_t step = 0;
  double accuracy = 0;
  double loss = 0;
  bool final = false;
};

// One metrics record ({"time": unix seconds, "step": N, "accuracy": A, "loss": L, "final": B,
// ...}) as a point on a clock that started at unix time `start_time`. INVALID_ARGUMENT naming
// the field when one of time, step or accuracy is missing or not a number.
absl::StatusOr<EvalPoint> PointFromRecord(const nlohmann::json& record, double start_time);

// A metrics file's text (JSON Lines; blank lines skipped), as points in time order.
// INVALID_ARGUMENT naming the line (1-based) that is not a record.
absl::StatusOr<std::vector<EvalPoint>> ParseMetricsLines(absl::string_view text,
                                                         double start_time);

// When the run's accuracy first reached `target`, on the run's clock: the first evaluation
// at or above it, interpolated linearly from the evaluation before it (which was below), so
// that a system evaluated less often is not charged for the wait until its next evaluation;
// the first evaluation's own time when it is the first point. nullopt when no evaluation
// reached it ("never"). The same rule for every system a benchmark compares.
std::optional<double> TimeToAccuracy(const std::vector<EvalPoint>& points, double target);

// The figures of quality a comparison's targets are fixed from, and the targets: for each
// margin (e.g. 0.002, 0.005, 0.01), the lower of the two systems' final quality less it,
// rounded down to 4 decimals, in ascending order.
std::vector<double> TargetsBelow(double quality_a, double quality_b,
                                 const std::vector<double>& margins);

// The accuracy of the final evaluation (the one marked final, else the last); nullopt without
// any evaluation.
std::optional<double> FinalAccuracy(const std::vector<EvalPoint>& points);

// The runs of one configuration for one figure. A missing value (a target not reached) counts
// as +infinity: the median is a value only when more than half of the runs have one (for an
// even count, the mean of the two middle values, both present), and max is infinite when a
// run missed.
struct Spread {
  int runs = 0;
  int present = 0;  // runs with a value
  std::optional<double> median;
  std::optional<double> min;  // nullopt when no run has a value
  std::optional<double> max;  // nullopt when a run has none ("never")
};
Spread Summarize(const std::vector<std::optional<double>>& values);

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_TTA_CURVE_H_
