// Chief: the coordinator of one training job at a time. It validates a submitted job, creates
// the model's variables on the ps tasks through the partitioner, then runs the step queue
// (Scheduler): each started worker is kept leased up to JobSpec.steps_in_flight steps (2 by
// default for a lone async or stale worker, so that it overlaps one step's pulls and pushes
// with another's compute), each with its own deadline; when a worker fails or a lease times
// out, every step it held goes back to the queue for another worker; each step is counted
// exactly once, and a job ends only once no call to any worker is in flight.
// It serves status (progress, speed, loss, evaluator metrics, workers) and, when the job ends
// and the evaluator has reported its final evaluation, tells every ps and worker to shut down
// (unless long-lived).
//
// Knows no gRPC: it reaches workers through WorkerInterface and the ps through PsClient.
// Thread-safety: all public methods are thread-safe. One dispatcher thread of its own runs
// the job; RPC completions only update state and wake it.
#ifndef SHARDPS_COORDINATOR_CHIEF_H_
#define SHARDPS_COORDINATOR_CHIEF_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "coordinator/worker_interface.h"
#include "common/data_root.h"
#include "proto/coordinator.pb.h"

namespace shardps {

class Chief {
 public:
  struct Options {
    // The ps tasks of TF_CONFIG, and a client of them (not owned; must outlive the chief). A
    // job runs on these, or on the first JobSpec.num_ps of them, or on the layout its journal
    // records after a scale (connect_ps reaches those).
    std::vector<std::string> ps_addresses;
    std::vector<std::unique_ptr<WorkerInterface>> workers;
    PsClient* ps = nullptr;
    // A client of the ps at these addresses (scale-ps, num_ps, a journal's layout). Unset:
    // jobs run on ps_addresses only, and every scale is refused (UNIMPLEMENTED).
    std::function<absl::StatusOr<std::shared_ptr<PsClient>>(
        const std::vector<std::string>& addresses)>
        connect_ps;
    // How long a scale waits for new ps to answer when its request gives no timeout.
    absl::Duration scale_timeout = absl::Seconds(60);
    bool has_evaluator = false;
    // After training, how long to wait for the evaluator's final report.
    absl::Duration final_eval_timeout = absl::Seconds(120);
    // How often a failed worker is probed (StartJob) to bring it back.
    absl::Duration probe_interval = absl::Seconds(1);
    // Step attempts that fail with a non-transport error before the job fails.
    int max_step_attempts = 4;
    // Where a job's checkpoint.dir and warm_start.from must lie (--data_root): a job naming
    // one outside it is refused (PERMISSION_DENIED). Default: unconfined.
    DataRoot data_root;
    // Used as the job's checkpoint.dir when its job file names none ("": no durable state).
    std::string default_checkpoint_dir;
    // With default_checkpoint_dir and no checkpoint schedule in the job file: checkpoint
    // this often.
    absl::Duration default_checkpoint_every = absl::Seconds(30);
    // How often each ps (and worker) is probed while a job runs, and how long the chief
    // tolerates failed probes before it pauses the job for that ps.
    absl::Duration probe_interval_ps = absl::Seconds(1);
    absl::Duration ps_unreachable_after = absl::Seconds(3);
    // How long one ps's Restore may take (it reads the checkpoint's bytes).
    absl::Duration restore_timeout = absl::Minutes(30);
    // Elastic workers (JoinJob): an interface to a worker that announced itself at this
    // address. Unset: joins of workers the chief does not know are refused (UNIMPLEMENTED).
    std::function<std::unique_ptr<WorkerInterface>(const std::string& address)> connect_worker;
    // --long_lived: workers may join between jobs too (else a join after the job ended is
    // refused: the cluster is about to shut down).
    bool long_lived = false;
  };

  static absl::StatusOr<std::unique_ptr<Chief>> Create(Options options);
  // Cancels every call to a worker still in flight (WorkerInterface::CancelAll) and waits
  // for their callbacks, so that none outlives the chief. A step whose call is cancelled is
  // not counted done: a restarted chief runs it again.
  virtual ~Chief() = default;

  // Validates and starts a job. INVALID_ARGUMENT names the job file's field at fault (the
  // dataset's data_dir included, and a checkpoint directory that holds a different job);
  // FAILED_PRECONDITION when a job is already running, or `resume` is RESUME and there is
  // nothing to resume from. When the job's checkpoint directory holds state of this job, it
  // resumes (unless FRESH): from the ps tasks' live state when every ps still holds it (no
  // work lost), else from the newest usable checkpoint; a job that had finished is reported
  // as finished (already_finished) and not trained again.
  virtual absl::StatusOr<SubmitJobResponse> Submit(
      const std::string& job_json,
      SubmitJobRequest::Resume resume = SubmitJobRequest::AUTO) = 0;
  virtual JobStatus Status() = 0;
  virtual absl::StatusOr<int64_t> AddSteps(const std::string& job_id, int64_t steps) = 0;
  virtual absl::Status Cancel(const std::string& job_id) = 0;
  virtual absl::Status ReportEval(const ReportEvalRequest& request) = 0;

  // Takes a checkpoint of the current job now; `done` runs (on another thread) once it is
  // committed, or with the error: FAILED_PRECONDITION when the job has no checkpoint
  // directory or is not running.
  virtual void Checkpoint(const std::string& job_id,
                          std::function<void(absl::StatusOr<CheckpointInfo>)> done) = 0;

  // The chief is being stopped (SIGTERM) while a job may run: checkpoints it (when it has a
  // directory; waiting at most `timeout`) and stops dispatching, leaving the ps and workers
  // up so that a restarted chief resumes. Returns whether a job was running (the daemon then
  // exits "interrupted", non-zero, so its supervisor restarts it).
  virtual bool Interrupt(absl::Duration timeout) = 0;

  // Blocks until the current job (if any) has ended and its final evaluation is in (or timed
  // out), or `timeout` passes. Returns true if ended.
  virtual bool WaitForJobEnd(absl::Duration timeout) = 0;
  // Tells every worker (but those that left) and ps to shut down.
  virtual void ShutdownCluster(const std::string& reason) = 0;

  // Elastic workers (docs/elastic.md). A worker announces itself at its start (JoinJob): a
  // worker the chief does not know gets a slot and is started on the job; one it knows at
  // the same address is a restarted process (its leased steps go back to the queue, the job
  // is started on it again). Errors change nothing: FAILED_PRECONDITION when the job has
  // ended (not long_lived) or the worker's ps are not the job's; ALREADY_EXISTS when a
  // worker at another address runs the job with that index; INVALID_ARGUMENT for a negative
  // index or an empty address.
  virtual absl::StatusOr<JoinJobResponse> Join(const JoinJobRequest& request) = 0;
  // A worker leaves (its SIGTERM): no more leases; returns once its calls in flight came back
  // or the wait passed (its steps then go back to the queue). NOT_FOUND for a worker the
  // chief does not know. Blocks: call it off gRPC's threads.
  virtual absl::StatusOr<LeaveJobResponse> Leave(const LeaveJobRequest& request) = 0;

  // Moves the running job onto request.num_ps ps tasks (docs/elastic.md, ScalePsRequest):
  // `done` runs (on another thread) once training resumed on them, or with the reason
  // nothing changed.
  virtual void ScalePs(const ScalePsRequest& request,
                       std::function<void(absl::StatusOr<ScalePsResponse>)> done) = 0;
  // Moves a dynamic table's buckets between neighbouring shards while the job trains
  // (docs/elastic.md, MoveTableBucketsRequest): `done` runs (on another thread) once they
  // moved, or with the reason they did not.
  virtual void MoveTableBuckets(
      const MoveTableBucketsRequest& request,
      std::function<void(absl::StatusOr<MoveTableBucketsResponse>)> done) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHIEF_H_
