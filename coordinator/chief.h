// Chief: the coordinator of one training job at a time. It validates a submitted job, creates
// the model's variables on the ps tasks through the partitioner, then runs the step queue
// (Scheduler): each started worker is kept leased up to JobSpec.steps_in_flight steps (2 by
// default in async and stale mode, so that the worker overlaps one step's pulls and pushes
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

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "coordinator/worker_interface.h"
#include "proto/coordinator.pb.h"

namespace shardps {

class Chief {
 public:
  struct Options {
    std::vector<std::string> ps_addresses;
    std::vector<std::unique_ptr<WorkerInterface>> workers;
    PsClient* ps = nullptr;  // not owned; must outlive the chief
    bool has_evaluator = false;
    // After training, how long to wait for the evaluator's final report.
    absl::Duration final_eval_timeout = absl::Seconds(120);
    // How often a failed worker is probed (StartJob) to bring it back.
    absl::Duration probe_interval = absl::Seconds(1);
    // Step attempts that fail with a non-transport error before the job fails.
    int max_step_attempts = 4;
  };

  static absl::StatusOr<std::unique_ptr<Chief>> Create(Options options);
  virtual ~Chief() = default;

  // Validates and starts a job. INVALID_ARGUMENT names the job file's field at fault;
  // FAILED_PRECONDITION when a job is already running or the dataset cannot be read.
  virtual absl::StatusOr<SubmitJobResponse> Submit(const std::string& job_json) = 0;
  virtual JobStatus Status() = 0;
  virtual absl::StatusOr<int64_t> AddSteps(const std::string& job_id, int64_t steps) = 0;
  virtual absl::Status Cancel(const std::string& job_id) = 0;
  virtual absl::Status ReportEval(const ReportEvalRequest& request) = 0;

  // Blocks until the current job (if any) has ended and its final evaluation is in (or timed
  // out), or `timeout` passes. Returns true if ended.
  virtual bool WaitForJobEnd(absl::Duration timeout) = 0;
  // Tells every worker and ps to shut down.
  virtual void ShutdownCluster(const std::string& reason) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHIEF_H_
