// Dispatcher: the chief's side of the steps. Its thread (Run) keeps each worker that runs the
// job leased up to StepsInFlight(job) steps (Scheduler), starts the job on workers that do not
// run it (probing failed ones), expires leases (marking their workers failed), pings idle
// workers, decides that a job succeeded (steps done, final checkpoint committed, final
// evaluation in or timed out), and ends a job whose state is final once no call to a worker
// is in flight. A step's result is taken in its call's callback: counted exactly once,
// journalled, or classified (step_failure.h) and acted on. The thread sleeps until an event
// (ChiefState::dispatch_wake) or its next timer; it never polls. Every call to a worker is
// counted until its callback has returned: WaitForCalls lets the chief outlive them all, and
// CancelCalls before it makes that wait short.
//
// Thread-safety: every method but CancelCalls and WaitForCalls REQUIRES the chief's mutex
// (ChiefState::mu); Run takes it itself. Callbacks take it on the worker interface's threads.
#ifndef SHARDPS_COORDINATOR_DISPATCHER_H_
#define SHARDPS_COORDINATOR_DISPATCHER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "coordinator/chief_state.h"
#include "coordinator/recovery.h"
#include "coordinator/scheduler.h"
#include "coordinator/worker_interface.h"
#include "proto/coordinator.pb.h"

namespace shardps {

class Dispatcher {
 public:
  struct Options {
    // How often a failed worker is probed (StartJob) to bring it back.
    absl::Duration probe_interval = absl::Seconds(1);
    // Step attempts that fail with a non-transport error before the job fails.
    int max_step_attempts = 4;
    bool has_evaluator = false;
    absl::Duration final_eval_timeout = absl::Seconds(120);
  };

  // `state`, every worker and `recovery` must outlive the dispatcher.
  Dispatcher(ChiefState* state, std::vector<WorkerInterface*> workers, Recovery* recovery,
             Options options);

  // The chief's mutex (ChiefState::mu), which the methods REQUIRE.
  absl::Mutex& mu() const ABSL_LOCK_RETURNED(s_->mu) { return s_->mu; }

  // A new job: every worker is to be started on it; the last job's step records go.
  void StartJobLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The job moved onto another ps set (ChiefState::ps_addresses, a scale): every worker is
  // started on the job again, with the new ps, once its calls in flight have returned. A
  // start sent before the move does not count.
  void RestartJobLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // The dispatcher's thread: returns when the job has ended (phase kEnded) or the chief
  // stops (ChiefState::stopping).
  void Run() ABSL_LOCKS_EXCLUDED(s_->mu);

  // Cancels every call to a worker in flight: each callback still runs, soon, most with
  // CANCELLED. REQUIRES: no new call can start (ChiefState::stopping set, Run returned).
  void CancelCalls() ABSL_LOCKS_EXCLUDED(s_->mu);

  // Blocks until every call to a worker has returned (callbacks included). REQUIRES: no new
  // call can start (ChiefState::stopping set, Run returned).
  void WaitForCalls() ABSL_LOCKS_EXCLUDED(s_->mu);

  // Adds the workers (in order), the recent speed and the recent steps' loss, accuracy and
  // timings to `status`.
  void AddToStatusLocked(JobStatus* status) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Some worker runs the current job.
  bool AnyWorkerRunsJobLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // Elastic workers (docs/elastic.md). Workers are kept in slots (the scheduler's worker
  // ids), one per task index; a slot is never removed, so that a call's callback always
  // finds its worker.
  // The slot of the worker with TF_CONFIG task index `task_index`, or -1.
  int FindWorkerLocked(int task_index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // A new slot for `worker` (which must outlive the dispatcher), to be started on the job.
  int AddWorkerLocked(WorkerInterface* worker, int task_index, const std::string& source)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The worker of `slot` (re)joins at `worker`'s address (the slot's interface, or a new one
  // for a new address, whose process holds none of the old one's steps: they go back to the
  // queue). It is no longer left, and is started on the job if it does not run it.
  void RejoinLocked(int slot, WorkerInterface* worker) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Whether `slot` runs the job now (a join at another address would take a live index).
  bool LiveLocked(int slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The worker of `slot` leaves: no more leases or probes. Returns once the calls in flight
  // to it have returned, or at `deadline`, when the steps it still holds go back to the
  // queue; returns how many did.
  int64_t LeaveLocked(int slot, absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The workers that have not left, their interfaces (for the cluster's shutdown).
  std::vector<WorkerInterface*> WorkersNotLeftLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  int num_workers_not_left() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  const std::string& AddressLocked(int slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    return worker_states_[slot].info.address();
  }
  WorkerInterface* WorkerLocked(int slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    return workers_[slot];
  }
  // "worker i: <error>" of the last step or start that failed on a worker ("" if none).
  const std::string& last_worker_error() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    return last_worker_error_;
  }

 private:
  struct WorkerState {
    WorkerInfo info;
    std::string started_job;  // job the worker has accepted
    // Calls to the worker not yet returned: its StartJob (only ever alone), or up to
    // StepsInFlight(job) RunSteps, each holding its own lease.
    int in_flight = 0;
    absl::Time next_probe = absl::InfinitePast();
    absl::Time last_contact = absl::InfinitePast();
    // StartJobs it refused in a row (it is up but cannot run the job): see OnJobStarted.
    int refusals = 0;
  };
  bool Left(int i) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    return worker_states_[i].info.left();
  }

  int num_workers() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    return static_cast<int>(workers_.size());
  }
  bool RunsJobLocked(const WorkerState& w) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    return w.started_job == s_->job.job_id();
  }

  // One round of the thread: leases, starts, pings. Returns true once the job has ended.
  bool RoundLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Whether the job has ended: SUCCEEDED once it may, and kEnded once nothing is in flight.
  bool EndedLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // When the thread must look again without an event (after `now`; InfiniteFuture: never).
  absl::Time NextTimerLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // Leases steps to worker i, if it runs the job and the phase leases, until it has
  // StepsInFlight(job) in flight or none is ready.
  void LeaseStepsLocked(int i, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Every step still leased to worker i goes back to the queue: with several steps in flight,
  // the one that failed (or expired) is not the worker's only one. Its other calls may still
  // return; a completion then counts if no other worker completed the step first.
  void MarkFailedLocked(int i, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void PingWorkerLocked(int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // REQUIRES: nothing is in flight to the worker.
  void StartJobOnLocked(int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void OnJobStartedLocked(int i, const std::string& job_id, int64_t layout_version,
                          const absl::Status& s, const std::string& backend)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // REQUIRES: the worker runs the job, with fewer than StepsInFlight(job) steps in flight.
  void RunStepOnLocked(int i, const StepTask& task, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void OnStepDoneLocked(int i, const StepRequest& request, const StepResponse& response,
                        const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void OnStepCompletedLocked(int i, const StepRequest& request, const StepResponse& response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void OnStepFailedLocked(int i, const StepRequest& request, const absl::Status& s)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The recovery shares the chief's mutex: says so to the thread-safety analysis, which
  // cannot see that both were given the same ChiefState.
  void RecoveryLockHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu)
      ABSL_ASSERT_EXCLUSIVE_LOCK(recovery_->mu()) {
    s_->mu.AssertHeld();
  }
  // A callback's end: one call fewer in flight; the thread looks again.
  void CallReturnedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  ChiefState* const s_;
  std::vector<WorkerInterface*> workers_ ABSL_GUARDED_BY(s_->mu);
  Recovery* const recovery_;
  const Options options_;

  std::vector<WorkerState> worker_states_ ABSL_GUARDED_BY(s_->mu);
  std::deque<StepResponse> recent_ ABSL_GUARDED_BY(s_->mu);
  std::deque<std::pair<absl::Time, int64_t>> progress_ ABSL_GUARDED_BY(s_->mu);
  std::map<int64_t, int> step_attempts_ ABSL_GUARDED_BY(s_->mu);
  std::string last_worker_error_ ABSL_GUARDED_BY(s_->mu);
  // Calls to workers whose callback has not returned (WaitForCalls).
  int calls_in_flight_ ABSL_GUARDED_BY(s_->mu) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_DISPATCHER_H_
