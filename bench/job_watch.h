// The training benchmarks' side of a job on a cluster's chief: submit it as `shardctl submit`
// would, then follow it to its end, seeing each status as it is polled (the benchmarks time
// the job from those polls). Both go through the chief client (client/chief_interface.h).
//
// Thread-safety: the functions are thread-safe; the callbacks run on the caller's thread.
#ifndef SHARDPS_BENCH_JOB_WATCH_H_
#define SHARDPS_BENCH_JOB_WATCH_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/chief_interface.h"
#include "proto/coordinator.pb.h"

namespace shardps {
namespace bench {

// Submits the job file's text. The chief answers once it has created the variables on the ps
// and started the job; an UNAVAILABLE answer (its ps tasks may still be starting) is tried
// again 500 ms later, up to 5 tries in all. Each try waits up to 60 s.
absl::StatusOr<SubmitJobResponse> SubmitJob(ChiefInterface& chief, const std::string& job_json);

struct FollowOptions {
  absl::Duration poll_interval = absl::Milliseconds(50);
  absl::Duration timeout = absl::Minutes(2);  // from the first poll
  // Called with every status of the job, as soon as it is polled.
  std::function<void(const JobStatus&)> on_status;
  // Whether the chief's process still runs: a failed poll once it has exited ends the follow.
  std::function<bool()> chief_running;
  // The cluster's logs, added to every error.
  std::function<std::string()> logs;
};

// Polls the chief until job `job_id` SUCCEEDED and returns that last status. Fails with the
// logs when the job ended otherwise (INTERNAL), when the chief runs another job (INTERNAL),
// when more than 40 polls in a row failed or one failed after the chief exited
// (UNAVAILABLE), or after the timeout (DEADLINE_EXCEEDED, with the steps done).
absl::StatusOr<JobStatus> FollowJob(ChiefInterface& chief, const std::string& job_id,
                                    const FollowOptions& options);

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_JOB_WATCH_H_
