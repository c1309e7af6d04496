// A worker's membership of the chief's job (elastic workers, docs/elastic.md): it announces
// itself when it starts (JoinJob), whether or not the chief's TF_CONFIG names it, and leaves
// when it is told to stop (its SIGTERM: LeaveJob, answered once the steps it holds are back).
// Shared by the worker daemon and the Python package's shardps.Worker.
//
// Thread-safety: the functions may run on any thread; `chief` must be thread-safe.
#ifndef SHARDPS_WORKER_CHIEF_MEMBERSHIP_H_
#define SHARDPS_WORKER_CHIEF_MEMBERSHIP_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/chief_interface.h"
#include "common/tf_config.h"

namespace shardps {

struct Membership {
  int task_index = 0;
  std::string address;                    // where the chief reaches this worker
  std::vector<std::string> ps_addresses;  // as this worker's TF_CONFIG names them
  absl::Duration retry_interval = absl::Seconds(1);
  absl::Duration call_timeout = absl::Seconds(5);
  // StayJoined: a joined worker that has heard nothing from the chief for this long (the
  // chief calls a busy worker for every step and pings an idle one every 5 s) announces
  // itself again, looking every rejoin_check.
  absl::Duration rejoin_after_silence = absl::Seconds(8);
  absl::Duration rejoin_check = absl::Seconds(2);

  // This worker as its TF_CONFIG describes it (task, address, ps).
  static Membership FromConfig(const TfConfig& config);
};

// Calls JoinJob until the chief answers: the chief not reachable yet (UNAVAILABLE,
// DEADLINE_EXCEEDED) is retried every retry_interval. Returns the chief's answer (OK, or its
// refusal: FAILED_PRECONDITION for a job that ended or another job's worker, ALREADY_EXISTS
// for an index that is live elsewhere, another protocol's FAILED_PRECONDITION,
// PERMISSION_DENIED for a caller that is no worker), or CANCELLED once `stopped_within(d)`
// (which waits up to d) returns true.
absl::StatusOr<JoinJobResponse> JoinChief(
    ChiefInterface* chief, const Membership& me,
    const std::function<bool(absl::Duration)>& stopped_within);

// After a join: until `stopped_within` says stop, calls JoinJob again whenever the chief has
// been silent (`last_contact()`, the time of its last call) for rejoin_after_silence: a
// restarted chief knows only its TF_CONFIG's workers. Logs each rejoin.
void StayJoined(ChiefInterface* chief, const Membership& me,
                const std::function<absl::Time()>& last_contact,
                const std::function<bool(absl::Duration)>& stopped_within);

// Tells the chief this worker leaves, giving its steps in flight up to `wait` to come back.
absl::StatusOr<LeaveJobResponse> LeaveChief(ChiefInterface* chief, const Membership& me,
                                            absl::Duration wait);

// Whether a JoinChief error means the job is over for this worker (it ended before the
// worker came): the worker then exits as done, not as misconfigured.
bool JoinedTooLate(const absl::Status& status);

}  // namespace shardps

#endif  // SHARDPS_WORKER_CHIEF_MEMBERSHIP_H_
