// A StepExecutor that counts its steps into Prometheus metrics (metrics/registry.h) and
// forwards every call to the executor it wraps:
//   shardps_worker_steps_total{outcome="ok"|"failed"}, shardps_worker_examples_total (its
//   rate is examples/s), shardps_worker_step_phase_seconds{phase="pull"|"compute"|"push"}
//   (a histogram of each successful step's phases, as RunStep reports them),
//   shardps_worker_loss (the last step's mean loss).
//
// Thread-safety: as StepExecutor. `registry` must outlive the executor.
#ifndef SHARDPS_WORKER_METERED_STEPS_H_
#define SHARDPS_WORKER_METERED_STEPS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "metrics/registry.h"
#include "worker/step_executor.h"

namespace shardps {

// INVALID_ARGUMENT when the registry already holds one of the names with another type.
absl::StatusOr<std::unique_ptr<StepExecutor>> NewMeteredStepExecutor(
    std::unique_ptr<StepExecutor> steps, metrics::Registry* registry);

}  // namespace shardps

#endif  // SHARDPS_WORKER_METERED_STEPS_H_
