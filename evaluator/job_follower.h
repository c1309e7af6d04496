// The evaluator's ps mode: follows the chief's job. While the job trains it evaluates a
// consistent snapshot of the live parameters (every eval_every_steps steps, or as often as it
// can), and once training is done, the final model; each result goes to the metrics file
// and to the chief (ReportEval; the chief waits for the final one before it ends the job).
//
// Thread-safety: FollowChiefJobs runs on the calling thread; the options' objects must
// outlive it.
#ifndef SHARDPS_EVALUATOR_JOB_FOLLOWER_H_
#define SHARDPS_EVALUATOR_JOB_FOLLOWER_H_

#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "common/data_root.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "evaluator/chief_link.h"
#include "compute/compute_device.h"
#include "evaluator/eval_loop.h"

namespace shardps {

// What evaluates the live parameters of a followed job: the model compiled into the evaluator
// (the default) or a user's code (the Python package's shardps.Evaluator).
class LiveEvaluator {
 public:
  virtual ~LiveEvaluator() = default;
  // After each (re)connection to the ps tasks: discovers their layout and checks that they
  // hold what Evaluate reads (FAILED_PRECONDITION naming the variable otherwise).
  virtual absl::Status Check(PsClient* ps) = 0;
  // Reads a consistent state of the parameters (every shard read at one version, retried up
  // to max_pull_attempts) and evaluates it. Sets the metrics' step to the lowest version
  // read and `consistent` to whether all were one; the caller sets steps_done and
  // job_elapsed_s. `final`: the model after training ended.
  virtual absl::StatusOr<EvalMetrics> Evaluate(PsClient* ps, const JobStatus& status, bool final,
                                               int max_pull_attempts, bool* consistent) = 0;
};

struct JobFollowerOptions {
  ChiefLink* chief = nullptr;              // required
  const ComputeDevice* device = nullptr;  // where the job's model computes (default evaluator)
  DataRoot data_root;  // where the job's data_dir must lie (default evaluator)
  // The evaluator of a newly followed job. Default: its model's (Evaluator::Create on
  // `device`, required then).
  std::function<absl::StatusOr<std::unique_ptr<LiveEvaluator>>(const JobSpec& job)>
      new_evaluator;
  // A new client to the job's ps tasks, at `addresses` (JobStatus.ps, in task order: the
  // layout the job runs on, which a scale-ps changes; empty when the status names none);
  // called again after a failed evaluation and when the job's ps change.
  std::function<absl::StatusOr<std::unique_ptr<PsClient>>(
      const std::vector<std::string>& addresses)>
      connect_ps;  // required
  // Follow the next job after one ends, instead of returning.
  bool long_lived = false;
  // How often the chief is asked for the job's status.
  absl::Duration poll_interval = absl::Milliseconds(200);
  // After a failure (the chief unreachable, an evaluation failed): the first wait, doubled
  // after each further failure up to max_backoff.
  absl::Duration min_backoff = absl::Milliseconds(500);
  absl::Duration max_backoff = absl::Seconds(10);
  // Pulls of a snapshot until every shard has one version (PullSnapshot).
  int max_pull_attempts = 50;
};

// Runs until the followed job ends (kSucceeded, kJobFailed) or hooks.sleep says the daemon is
// stopping (kStopped). It follows the first job it sees RUNNING, and a later one that replaces
// it (never one that had ended before it was first seen), and by the job's state:
//   RUNNING with a phase ("paused: ...", "recovering: ..."): waits (the parameters may be
//     mid-rollback, and the job resumes).
//   RUNNING, training done: the final evaluation, reported with final = true; kSucceeded.
//   SUCCEEDED (the final report was not needed, or came too late): one final evaluation if
//     none was made (the ps may be gone: logged); kSucceeded.
//   FAILED or CANCELLED: kJobFailed, without a final evaluation.
// With long_lived it waits for the next job instead of returning kSucceeded. An unreachable
// chief (a chief restarting resumes its job) and failed evaluations (a ps restarting, the
// layout changed) are retried with backoff, each logged once (per distinct error), the latter
// re-discovering the layout; hooks.on_contact, on every answer of the chief, keeps the
// daemon's orphan clock from ending the wait.
EvalOutcome FollowChiefJobs(const JobFollowerOptions& options, const EvalLoopHooks& hooks);

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_JOB_FOLLOWER_H_
