#include "worker/chief_membership.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "common/log.h"

namespace shardps {
namespace {

JoinJobRequest JoinRequest(const Membership& me) {
  JoinJobRequest request;
  request.set_task_index(me.task_index);
  request.set_address(me.address);
  for (const std::string& ps : me.ps_addresses) request.add_ps_addresses(ps);
  return request;
}

}  // namespace

Membership Membership::FromConfig(const TfConfig& config) {
  Membership me;
  me.task_index = config.task_index;
  me.address = config.TaskAddress();
  me.ps_addresses = config.Tasks("ps");
  return me;
}

absl::StatusOr<JoinJobResponse> JoinChief(
    ChiefInterface* chief, const Membership& me,
    const std::function<bool(absl::Duration)>& stopped_within) {
  const JoinJobRequest request = JoinRequest(me);
  bool said = false;
  while (true) {
    absl::StatusOr<JoinJobResponse> answer = chief->JoinJob(request, me.call_timeout);
    if (answer.ok() || !(absl::IsUnavailable(answer.status()) ||
                         absl::IsDeadlineExceeded(answer.status()))) {
      return answer;
    }
    if (!said) {
      LogInfo() << "joining the job at the chief " << chief->address()
                << ": not reachable yet (" << answer.status().message() << "); retrying every "
                << absl::FormatDuration(me.retry_interval);
      said = true;
    }
    if (stopped_within(me.retry_interval)) {
      return absl::CancelledError("stopped before the chief answered JoinJob");
    }
  }
}

void StayJoined(ChiefInterface* chief, const Membership& me,
                const std::function<absl::Time()>& last_contact,
                const std::function<bool(absl::Duration)>& stopped_within) {
  const JoinJobRequest request = JoinRequest(me);
  absl::Time last_join = absl::Now();
  while (!stopped_within(me.rejoin_check)) {
    const absl::Time heard = std::max(last_contact(), last_join);
    if (absl::Now() - heard < me.rejoin_after_silence) continue;
    last_join = absl::Now();
    absl::StatusOr<JoinJobResponse> again = chief->JoinJob(request, me.call_timeout);
    if (again.ok()) {
      LogInfo() << "no call from the chief for " << absl::FormatDuration(absl::Now() - heard)
                << ": joined again (" << again->workers() << " workers)";
    }
  }
}

absl::StatusOr<LeaveJobResponse> LeaveChief(ChiefInterface* chief, const Membership& me,
                                            absl::Duration wait) {
  LeaveJobRequest request;
  request.set_task_index(me.task_index);
  request.set_address(me.address);
  request.set_wait_ms(absl::ToInt64Milliseconds(wait));
  return chief->LeaveJob(request, wait + me.call_timeout);
}

bool JoinedTooLate(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         absl::StrContains(status.message(), "arrived after job");
}

}  // namespace shardps
