#include "coordinator/chief_state.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace shardps {

bool ChiefState::SetPhaseLocked(JobPhase::Kind next, std::string detail) {
  const JobPhase::Kind before = phase.kind();
  if (!phase.MoveTo(next, std::move(detail))) return false;
  if (phase.kind() != before) {
    dispatch_wake = true;
    control_wake = true;
  }
  return true;
}

bool ChiefState::ReleasePhaseLocked(JobPhase::Kind hold) {
  if (!phase.Release(hold)) return false;
  dispatch_wake = true;
  control_wake = true;
  return true;
}

void ChiefState::EndJobLocked(JobStatus::State state, const std::string& error) {
  status.set_state(state);
  if (!error.empty()) status.set_error(error);
  if (store != nullptr && state != JobStatus::SUCCEEDED) {
    // Not resumed by a chief restarted without --job.
    store_state.ended = JobStatus::State_Name(state);
    WriteStateLocked();
  }
  SetPhaseLocked(JobPhase::Kind::kEnding);
  dispatch_wake = true;
  control_wake = true;
}

void ChiefState::WriteStateLocked() {
  absl::Status s = store->WriteState(store_state);
  if (!s.ok()) {
    status.set_checkpoint_error(absl::StrCat("writing the job state: ", s.message()));
    LogWarning() << status.checkpoint_error();
  }
}

absl::Status ChiefState::CheckJobLocked(const std::string& job_id) const {
  if (status.state() == JobStatus::NO_JOB) {
    return absl::FailedPreconditionError("no job has been submitted");
  }
  if (!job_id.empty() && job_id != status.job_id()) {
    return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" is not the current job \"",
                                            status.job_id(), "\""));
  }
  return absl::OkStatus();
}

}  // namespace shardps
