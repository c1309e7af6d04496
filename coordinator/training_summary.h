// TrainingSummary: the chief's training series for TensorBoard (observability/), from the
// job's status as the chief daemon polls it: train/loss (the mean over recent steps),
// train/examples_per_s and train/steps_per_s (over the last ~10 s), each at step = the job's
// steps done. A point is written when steps were done since the last one and `every` has
// passed, and once more when training ends, so that each series ends at the job's last step.
// A rollback (recovery) makes the steps go back; TensorBoard then drops the points past the
// new step, as it does after a restart.
//
// Thread-safety: a TrainingSummary is used by one thread.
#ifndef SHARDPS_COORDINATOR_TRAINING_SUMMARY_H_
#define SHARDPS_COORDINATOR_TRAINING_SUMMARY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "observability/summary_writer.h"
#include "proto/coordinator.pb.h"

namespace shardps {

// The point `status` gives: the loss once this chief has seen a step done (0, not measured,
// is left out), the speeds once it has measured them (two completions apart). Empty before
// the first step.
std::vector<Scalar> TrainingScalars(const JobStatus& status);

class TrainingSummary {
 public:
  TrainingSummary(std::unique_ptr<SummaryWriter> writer, absl::Duration every)
      : writer_(std::move(writer)), every_(every) {}

  // Looks at the job's status, taken at `now`, and writes a point when one is due.
  void Observe(const JobStatus& status, absl::Time now);

 private:
  const std::unique_ptr<SummaryWriter> writer_;
  const absl::Duration every_;
  std::string job_id_;              // the job of the last point
  int64_t last_step_ = -1;          // its step; -1: none yet
  absl::Time last_write_ = absl::InfinitePast();
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_TRAINING_SUMMARY_H_
