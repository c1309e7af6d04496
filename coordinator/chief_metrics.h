// The chief's Prometheus metrics, read at each scrape from one JobStatus snapshot (the same
// JobStatus `shardctl status` shows):
// steps done, queued, leased, failed and leased again, recoveries, the last checkpoint's
// duration, bytes and age, the last evaluation (AddChiefMetrics lists them). Each is a gauge:
// a new job, or a rollback to a checkpoint, takes them back down.
//
// Thread-safety: `status` is called on the scraping thread; it must be thread-safe and stay
// valid until the daemon's metrics stop.
#ifndef SHARDPS_COORDINATOR_CHIEF_METRICS_H_
#define SHARDPS_COORDINATOR_CHIEF_METRICS_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "metrics/registry.h"
#include "proto/coordinator.pb.h"

namespace shardps {

// Registers on `registry`:
//   shardps_chief_job_running, shardps_chief_steps_done, shardps_chief_steps_in_job,
//   shardps_chief_steps_queued, shardps_chief_steps_leased, shardps_chief_steps_failed
//     (worker failures: steps that failed on a worker), shardps_chief_steps_released
//     (steps leased again after a failure), shardps_chief_steps_lost (undone by rollbacks),
//   shardps_chief_recoveries, shardps_chief_checkpoint_id,
//   shardps_chief_checkpoint_duration_seconds, shardps_chief_checkpoint_bytes,
//   shardps_chief_checkpoint_age_seconds (from `now`),
//   shardps_chief_examples_per_second, shardps_chief_step_phase_seconds{phase} (pull,
//     compute, push: recent steps' mean on their workers),
//   shardps_chief_eval_accuracy, shardps_chief_eval_loss, shardps_chief_eval_auc (the last
//     evaluation the evaluator reported),
//   shardps_chief_workers{state}, shardps_chief_ps{state}.
absl::Status AddChiefMetrics(metrics::Registry* registry, std::function<JobStatus()> status,
                             std::function<absl::Time()> now = absl::Now);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHIEF_METRICS_H_
