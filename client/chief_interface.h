// ChiefInterface: a transport-neutral client of the chief's job API (proto/coordinator.proto's
// CoordinatorService), as PsInterface is of one ps. shardctl, the evaluator, the process tests
// and the benchmarks talk to the chief only through it; client/grpc_chief_interface.h makes
// the network implementation.
//
// Every call blocks for at most `timeout` and then fails with DEADLINE_EXCEEDED; UNAVAILABLE
// means the chief could not be reached. Other codes are the chief's own answer.
//
// Thread-safety: implementations are thread-safe; calls may be issued concurrently.
#ifndef SHARDPS_CLIENT_CHIEF_INTERFACE_H_
#define SHARDPS_CLIENT_CHIEF_INTERFACE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.pb.h"

namespace shardps {

class ChiefInterface {
 public:
  virtual ~ChiefInterface() = default;

  // The chief's "host:port", for messages.
  virtual const std::string& address() const = 0;

  virtual absl::StatusOr<SubmitJobResponse> SubmitJob(const SubmitJobRequest& request,
                                                      absl::Duration timeout) = 0;
  virtual absl::StatusOr<JobStatus> GetStatus(absl::Duration timeout) = 0;
  virtual absl::StatusOr<AddStepsResponse> AddSteps(const AddStepsRequest& request,
                                                    absl::Duration timeout) = 0;
  virtual absl::Status CancelJob(const CancelJobRequest& request, absl::Duration timeout) = 0;
  // Answers once the checkpoint is committed: give it a timeout to match.
  virtual absl::StatusOr<CheckpointInfo> Checkpoint(const CheckpointRequest& request,
                                                    absl::Duration timeout) = 0;
  // NOT_FOUND when request.job_id() is not the chief's current job.
  virtual absl::Status ReportEval(const ReportEvalRequest& request, absl::Duration timeout) = 0;
  // Elastic workers: a worker announces itself, and leaves (answered once its steps came
  // back: give it a timeout above the request's wait).
  virtual absl::StatusOr<JoinJobResponse> JoinJob(const JoinJobRequest& request,
                                                  absl::Duration timeout) = 0;
  virtual absl::StatusOr<LeaveJobResponse> LeaveJob(const LeaveJobRequest& request,
                                                    absl::Duration timeout) = 0;
  // Moves the job onto request.num_ps ps (docs/elastic.md); answers once training resumed on
  // them (a drain, a checkpoint and a restore): give it a timeout to match.
  virtual absl::StatusOr<ScalePsResponse> ScalePs(const ScalePsRequest& request,
                                                  absl::Duration timeout) = 0;
  // Moves a dynamic table's buckets between neighbouring shards while the job trains
  // (docs/elastic.md); answers once they moved.
  virtual absl::StatusOr<MoveTableBucketsResponse> MoveTableBuckets(
      const MoveTableBucketsRequest& request, absl::Duration timeout) = 0;

  // How WaitFor polls.
  struct WaitOptions {
    absl::Duration poll_interval = absl::Milliseconds(100);
    // Each GetStatus' timeout: short where the chief may be cut off, so a lost call does not
    // hold the poll.
    absl::Duration call_timeout = absl::Seconds(5);
    // Called with every answer, failed calls included, before the condition is tested; a
    // non-OK return ends the wait with that status (a job that ended otherwise, a process
    // that exited, an interrupted watch).
    std::function<absl::Status(const absl::StatusOr<JobStatus>& answer)> on_answer;
    // Sleeps between polls (tests and interruptible callers replace it); default SleepFor.
    std::function<void(absl::Duration)> sleep;
  };

  // Polls GetStatus until `condition` holds for an answer and returns that answer. A failed
  // call counts as "not yet" (the chief may be starting, restarting or cut off). At
  // `deadline`: DEADLINE_EXCEEDED naming the last answer. The first poll is made even when
  // `deadline` has passed.
  absl::StatusOr<JobStatus> WaitFor(const std::function<bool(const JobStatus&)>& condition,
                                    absl::Time deadline, const WaitOptions& options);
  absl::StatusOr<JobStatus> WaitFor(const std::function<bool(const JobStatus&)>& condition,
                                    absl::Time deadline) {
    return WaitFor(condition, deadline, WaitOptions());
  }
};

// For WaitOptions::on_answer: FAILED_PRECONDITION once the job has ended (SUCCEEDED,
// CANCELLED or FAILED) in a state other than `wanted`, naming the state and the job's error;
// OK for anything else, failed calls included.
absl::Status EndedOtherThan(JobStatus::State wanted, const absl::StatusOr<JobStatus>& answer);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_CHIEF_INTERFACE_H_
