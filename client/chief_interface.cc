#include "client/chief_interface.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace shardps {
namespace {

bool Ended(JobStatus::State state) {
  return state == JobStatus::SUCCEEDED || state == JobStatus::CANCELLED ||
         state == JobStatus::FAILED;
}

std::string Describe(const absl::StatusOr<JobStatus>& answer) {
  if (!answer.ok()) return answer.status().ToString();
  return absl::StrCat(JobStatus::State_Name(answer->state()), ", ", answer->steps_done(), "/",
                      answer->total_steps(), " steps, phase \"", answer->phase(), "\": ",
                      answer->ShortDebugString());
}

}  // namespace

absl::StatusOr<JobStatus> ChiefInterface::WaitFor(
    const std::function<bool(const JobStatus&)>& condition, absl::Time deadline,
    const WaitOptions& options) {
  const absl::Time start = absl::Now();
  absl::StatusOr<JobStatus> answer = absl::UnavailableError("not asked yet");
  while (true) {
    answer = GetStatus(options.call_timeout);
    if (options.on_answer) {
      if (absl::Status s = options.on_answer(answer); !s.ok()) return s;
    }
    if (answer.ok() && condition(*answer)) return answer;
    const absl::Time now = absl::Now();
    if (now >= deadline) break;
    const absl::Duration pause = std::min(options.poll_interval, deadline - now);
    if (options.sleep) {
      options.sleep(pause);
    } else {
      absl::SleepFor(pause);
    }
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the job status of the chief at ", address(),
                   " did not come to the expected state in ",
                   absl::FormatDuration(absl::Now() - start), "; last: ", Describe(answer)));
}

absl::Status EndedOtherThan(JobStatus::State wanted, const absl::StatusOr<JobStatus>& answer) {
  if (!answer.ok() || answer->state() == wanted || !Ended(answer->state())) {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "job ", answer->job_id(), " ended as ", JobStatus::State_Name(answer->state()),
      answer->error().empty() ? "" : ": ", answer->error()));
}

}  // namespace shardps
