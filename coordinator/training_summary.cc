#include "coordinator/training_summary.h"

namespace shardps {

std::vector<Scalar> TrainingScalars(const JobStatus& status) {
  std::vector<Scalar> scalars;
  if (status.steps_done() <= 0) return scalars;
  // 0 until a step has been done since this chief started (a restarted chief resumes at
  // steps done with no recent steps yet), and for external workers that report no loss.
  if (status.loss() > 0) scalars.push_back({"train/loss", status.loss()});
  if (status.steps_per_sec() > 0) {
    scalars.push_back({"train/examples_per_s", status.examples_per_sec()});
    scalars.push_back({"train/steps_per_s", status.steps_per_sec()});
  }
  return scalars;
}

void TrainingSummary::Observe(const JobStatus& status, absl::Time now) {
  if (status.state() == JobStatus::NO_JOB) return;
  if (status.job_id() != job_id_) {  // a long-lived chief's next job
    job_id_ = status.job_id();
    last_step_ = -1;
    last_write_ = absl::InfinitePast();
  }
  const int64_t step = status.steps_done();
  if (step == last_step_) return;
  const bool ended = status.training_done() || status.state() != JobStatus::RUNNING;
  if (!ended && now - last_write_ < every_) return;
  const std::vector<Scalar> scalars = TrainingScalars(status);
  if (scalars.empty()) return;
  // A failed write is said by the writer; the point is not tried again (the next one is).
  writer_->Write(step, scalars);
  last_step_ = step;
  last_write_ = now;
}

}  // namespace shardps
