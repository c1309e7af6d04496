#include "coordinator/chief_test_util.h"

#include <memory>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "coordinator/job_phase.h"
#include "coordinator/scheduler.h"

namespace shardps {

absl::Status StartTrainingLocked(ChiefState* state, const JobSpec& job,
                                 std::vector<VariableDef> defs, int64_t total_steps) {
  Scheduler::Plan plan;
  plan.total_steps = total_steps;
  absl::StatusOr<Scheduler> scheduler = Scheduler::Create(plan);
  if (!scheduler.ok()) return scheduler.status();
  state->job = job;
  state->defs = std::move(defs);
  state->scheduler = std::make_unique<Scheduler>(*std::move(scheduler));
  state->generation = 1;
  state->status.set_state(JobStatus::RUNNING);
  state->status.set_job_id(job.job_id());
  for (JobPhase::Kind next : {JobPhase::Kind::kStarting, JobPhase::Kind::kTraining}) {
    if (!state->SetPhaseLocked(next)) {
      return absl::InternalError(
          absl::StrCat("the job's phase refused the change to ", JobPhase::Name(next)));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardps
