// StepExecutor: the worker's domain. It accepts a job from the chief (loads the training set,
// builds the model and its compute backend, connects to the ps tasks and checks that they
// hold every parameter), then runs the steps it is given: gather the named batch, pull every
// parameter, forward and backward, push every gradient, report loss and timings. It knows
// nothing of gRPC (worker/rpc/ adapts it); the ps is reached through `connect`, so tests run
// it against in-process ps tasks.
//
// Thread-safety: thread-safe. StartJob calls run one at a time; steps of the job being
// replaced finish on that job's buffers and client; Status never waits for either.
#ifndef SHARDPS_WORKER_STEP_EXECUTOR_H_
#define SHARDPS_WORKER_STEP_EXECUTOR_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "common/data_root.h"
#include "compute/backend_kind.h"
#include "proto/worker.pb.h"

namespace shardps {

class StepExecutor {
 public:
  using ConnectFn = std::function<absl::StatusOr<std::unique_ptr<PsClient>>(
      const std::vector<std::string>& ps_addresses)>;

  struct Options {
    int task_index = 0;
    // kAuto: each job's JobSpec.backend decides. kCpu / kGpu: the daemon's --backend, which
    // overrides every job's choice.
    BackendKind backend_override = BackendKind::kAuto;
    // Compute threads of the CPU backend (<= 0: one per hardware thread).
    int num_threads = 0;
    // A client to the ps tasks of a job, given their addresses in task order.
    ConnectFn connect;
    // Where a job's data_dir must lie (--data_root and its dataset roots).
    DataRoot data_root;
    // How long a pull may wait for the step's min_version before the step fails.
    absl::Duration pull_wait_timeout = absl::Seconds(30);
    // Tests only (the worker's --test_only_delay_before_push_ms): each step sleeps this long
    // between its compute and its push, so that a test has a straggler (backup workers).
    absl::Duration test_only_delay_before_push = absl::ZeroDuration();
  };

  // Opens the compute device for options.backend_override at once (kAuto: the GPU when
  // there is one), so that a daemon reports its backend, and fails, at startup.
  static absl::StatusOr<std::unique_ptr<StepExecutor>> Create(Options options);
  virtual ~StepExecutor() = default;

  // Starts job request.job(), replacing the current one. Idempotent for the current job's
  // request: the same spec (every field) and ps addresses return the backend's name again and
  // change nothing. The same job id with anything else different (a chief that restarted
  // with another partitioner, say) starts the job afresh: it re-connects to the ps tasks and
  // re-discovers the shard layout, and steps of the old start finish on the old one. Errors
  // (nothing changes):
  // INVALID_ARGUMENT for a bad request (empty job id, batch size <= 0, bad model or backend
  // text, no ps addresses); FAILED_PRECONDITION when the data cannot be loaded (naming the
  // data_dir), a parameter is missing on the ps or has another shape (naming the variable
  // "{job name}/{param}"), or the model's compute cannot be created; the connect error
  // otherwise.
  virtual absl::StatusOr<StartJobResponse> StartJob(const StartJobRequest& request) = 0;

  // Runs one step of the current job, concurrently with at most one other (a third call
  // waits), and returns once its gradients are pushed. The two have their own parameter,
  // gradient and batch buffers and only their computes take turns: while one step computes,
  // the other pulls or pushes (the chief keeps JobSpec.steps_in_flight steps leased per
  // worker for that). Any worker may run any step: its pushes carry StepIdempotencyKey, so a
  // re-run of a step the ps has applied is not applied twice. pull_ms and push_ms are the wall
  // time of its pull and push, compute_ms that of its compute alone (not the wait for another
  // step's).
  // FAILED_PRECONDITION with ErrorDetail UNKNOWN_JOB when request.job_id() is not the current
  // job (say, this worker restarted): the chief then sends StartJob again. Otherwise the
  // batch's error (INVALID_ARGUMENT / OUT_OF_RANGE for a bad epoch or batch index), or the
  // pull's, compute's or push's, annotated with the step and keeping its ErrorDetail
  // (PS_UNAVAILABLE, PS_STATE_LOST, STALE_GENERATION...: client/ps_client.h).
  virtual absl::StatusOr<StepResponse> RunStep(const StepRequest& request) = 0;

  // Task index, backend name, current job id and the steps it has completed here.
  virtual WorkerStatusResponse Status() = 0;

  // The current backend's name, e.g. "cpu (Eigen, 2 threads)".
  virtual std::string BackendName() = 0;
};

// The idempotency key of step `step_id`'s pushes in job `job_id` at recovery generation
// `generation`: a stable hash (the same in every process and build), never zero. The
// generation is the job's when the step was leased: a ps rolled back since refuses the
// pushes, and a step re-run after a rollback gets new request ids, so the ps applies it
// instead of taking it for a duplicate.
uint64_t StepIdempotencyKey(const std::string& job_id, int64_t step_id, int64_t generation);

}  // namespace shardps

#endif  // SHARDPS_WORKER_STEP_EXECUTOR_H_
