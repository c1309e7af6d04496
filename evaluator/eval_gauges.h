// The evaluator's Prometheus metrics, set after each evaluation:
//   shardps_evaluator_accuracy, shardps_evaluator_loss, shardps_evaluator_auc (click models;
//   0 for others), shardps_evaluator_evaluated_step (the parameter version evaluated),
//   shardps_evaluator_evaluations_total, shardps_evaluator_examples_total.
//
// Thread-safety: Record may be called from any thread.
#ifndef SHARDPS_EVALUATOR_EVAL_GAUGES_H_
#define SHARDPS_EVALUATOR_EVAL_GAUGES_H_

#include <memory>

#include "absl/status/statusor.h"
#include "evaluator/metrics_file.h"
#include "metrics/registry.h"

namespace shardps {

class EvalGauges {
 public:
  // INVALID_ARGUMENT when the registry holds one of the names with another type.
  static absl::StatusOr<std::unique_ptr<EvalGauges>> Create(metrics::Registry* registry);
  void Record(const EvalRecord& record);

 private:
  EvalGauges() = default;
  metrics::Gauge* accuracy_ = nullptr;
  metrics::Gauge* loss_ = nullptr;
  metrics::Gauge* auc_ = nullptr;
  metrics::Gauge* step_ = nullptr;
  metrics::Counter* evaluations_ = nullptr;
  metrics::Counter* examples_ = nullptr;
};

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_EVAL_GAUGES_H_
