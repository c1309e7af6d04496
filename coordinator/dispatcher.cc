#include "coordinator/dispatcher.h"

#include <algorithm>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/job_spec.h"
#include "coordinator/step_failure.h"

namespace shardps {

using Kind = JobPhase::Kind;

namespace {

// An idle worker hears from the chief this often (its orphan clock).
constexpr absl::Duration kPingIdleAfter = absl::Seconds(5);
// A timer wakes the thread this long after its moment, which its checks compare with ">".
constexpr absl::Duration kTimerSlack = absl::Milliseconds(1);

// "busy" while a step is in flight, else "idle"; a worker that is failed or starting keeps
// that state until its StartJob succeeds.
void SetRunningState(WorkerInfo& info, int in_flight) {
  if (info.left()) return;  // "leaving", then "left"
  info.set_state(in_flight > 0 ? "busy" : "idle");
}

}  // namespace

Dispatcher::Dispatcher(ChiefState* state, std::vector<WorkerInterface*> workers,
                       Recovery* recovery, Options options)
    : s_(state), workers_(std::move(workers)), recovery_(recovery), options_(std::move(options)) {
  absl::MutexLock lock(&s_->mu);
  for (size_t i = 0; i < workers_.size(); ++i) {
    WorkerInfo info;
    info.set_index(i);
    info.set_address(workers_[i]->address());
    info.set_state("starting");
    info.set_source("tf_config");
    worker_states_.push_back(WorkerState{info});
  }
}

int Dispatcher::FindWorkerLocked(int task_index) const {
  for (int i = 0; i < num_workers(); ++i) {
    if (worker_states_[i].info.index() == task_index) return i;
  }
  return -1;
}

int Dispatcher::AddWorkerLocked(WorkerInterface* worker, int task_index,
                                const std::string& source) {
  WorkerInfo info;
  info.set_index(task_index);
  info.set_address(worker->address());
  info.set_state("starting");
  info.set_source(source);
  info.set_joins(1);
  workers_.push_back(worker);
  worker_states_.push_back(WorkerState{info});
  s_->WakeDispatcherLocked();
  return num_workers() - 1;
}

void Dispatcher::RejoinLocked(int slot, WorkerInterface* worker) {
  WorkerState& w = worker_states_[slot];
  w.info.set_left(false);
  w.info.set_joins(w.info.joins() + 1);
  w.refusals = 0;
  w.next_probe = absl::InfinitePast();  // probed now if it does not run the job
  if (workers_[slot] != worker) {
    // Another address: a new process, which holds nothing the old one did (the old one's
    // calls fail on its own interface, and its leases go back to the queue).
    s_->scheduler->RequeueWorker(slot);
    workers_[slot] = worker;
    w.info.set_address(worker->address());
    w.started_job.clear();
    w.info.set_state("starting");
  } else if (!RunsJobLocked(w)) {
    w.info.set_state("starting");
  }
  // The same address: the same slot, whether the process is the one the chief already runs
  // the job on (StartJob is idempotent there) or a restarted one (whose steps in flight fail
  // as UNKNOWN_JOB, and the job is started on it again).
  s_->WakeDispatcherLocked();
}

bool Dispatcher::LiveLocked(int slot) const {
  const WorkerState& w = worker_states_[slot];
  return !w.info.left() && RunsJobLocked(w);
}

int64_t Dispatcher::LeaveLocked(int slot, absl::Time deadline) {
  worker_states_[slot].info.set_left(true);
  worker_states_[slot].info.set_state("leaving");
  // By slot: a join meanwhile may move the vector.
  auto drained = [this, slot]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    return worker_states_[slot].in_flight == 0;
  };
  s_->mu.AwaitWithDeadline(absl::Condition(&drained), deadline);
  // Steps still out (a call that did not come back in time) go to other workers; a late
  // completion of one still counts if no other worker completed it first.
  const int64_t handed_back = static_cast<int64_t>(s_->scheduler->RequeueWorker(slot).size());
  WorkerState& w = worker_states_[slot];
  w.started_job.clear();
  w.info.set_state("left");
  s_->WakeDispatcherLocked();
  return handed_back;
}

std::vector<WorkerInterface*> Dispatcher::WorkersNotLeftLocked() const {
  std::vector<WorkerInterface*> out;
  for (int i = 0; i < num_workers(); ++i) {
    if (!Left(i)) out.push_back(workers_[i]);
  }
  return out;
}

int Dispatcher::num_workers_not_left() const {
  int n = 0;
  for (int i = 0; i < num_workers(); ++i) n += Left(i) ? 0 : 1;
  return n;
}

void Dispatcher::StartJobLocked() {
  recent_.clear();
  progress_.clear();
  step_attempts_.clear();
  for (WorkerState& w : worker_states_) {
    w.refusals = 0;
    w.started_job.clear();
    w.info.set_state("starting");
    w.next_probe = absl::InfinitePast();
  }
}

void Dispatcher::RestartJobLocked() {
  for (WorkerState& w : worker_states_) {
    if (w.started_job.empty()) continue;
    w.started_job.clear();
    w.refusals = 0;
    w.info.set_state("starting");
    w.next_probe = absl::InfinitePast();
  }
  s_->WakeDispatcherLocked();
}

void Dispatcher::Run() {
  absl::MutexLock lock(&s_->mu);
  while (!s_->stopping) {
    if (RoundLocked(absl::Now())) return;
    s_->dispatch_wake = false;
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
      return s_->dispatch_wake || s_->stopping;
    };
    s_->mu.AwaitWithDeadline(absl::Condition(&woken), NextTimerLocked(absl::Now()));
  }
}

bool Dispatcher::RoundLocked(absl::Time now) {
  for (const auto& [step, worker] : s_->scheduler->ExpireLeases(now)) {
    // Once per worker, though several of its leases may expire together.
    if (RunsJobLocked(worker_states_[worker])) {
      MarkFailedLocked(worker, absl::StrCat("step ", step, " lease expired"));
    }
  }
  for (int i = 0; i < num_workers(); ++i) {
    WorkerState& w = worker_states_[i];
    if (w.info.left()) continue;  // no probes, leases or pings until it joins again
    if (!RunsJobLocked(w)) {
      // A failed or restarted worker is probed once every call to it has returned, so
      // that a lease it is given later is never confused with an old call.
      if (w.in_flight == 0 && now >= w.next_probe &&
          s_->status.state() == JobStatus::RUNNING && s_->phase.kind() != Kind::kInterrupted) {
        StartJobOnLocked(i);
      }
      continue;
    }
    LeaseStepsLocked(i, now);
    if (w.in_flight == 0 && now - w.last_contact > kPingIdleAfter) PingWorkerLocked(i);
  }
  return EndedLocked(now);
}

bool Dispatcher::EndedLocked(absl::Time now) {
  if (s_->status.state() == JobStatus::RUNNING && s_->scheduler->Finished()) {
    if (s_->training_end == absl::InfiniteFuture()) s_->training_end = now;
    const bool checkpointed = s_->store == nullptr || s_->phase.final_checkpoint_done();
    const bool eval_done = !options_.has_evaluator || s_->final_eval ||
                           now - s_->training_end > options_.final_eval_timeout;
    if (checkpointed && eval_done) s_->EndJobLocked(JobStatus::SUCCEEDED, "");
  }
  if (s_->status.state() == JobStatus::RUNNING) return false;
  // Let every call in flight drain (bounded by their deadlines), then end. A job that
  // failed or was cancelled waits for no final evaluation.
  bool busy = false;
  for (const WorkerState& w : worker_states_) busy |= w.in_flight > 0;
  if (s_->training_end == absl::InfiniteFuture()) s_->training_end = now;
  if (busy) return false;
  s_->end = now;
  s_->SetPhaseLocked(Kind::kEnded);
  s_->WakeControlLocked();
  return true;
}

absl::Time Dispatcher::NextTimerLocked(absl::Time now) const {
  // Each timer fires kTimerSlack after its moment (its check compares with ">" or "<"); one
  // already past was handled by this round.
  absl::Time next = absl::InfiniteFuture();
  auto consider = [&next, now](absl::Time moment) {
    if (moment == absl::InfiniteFuture() || moment == absl::InfinitePast()) return;
    if (moment + kTimerSlack > now) next = std::min(next, moment + kTimerSlack);
  };
  consider(s_->scheduler->NextLeaseDeadline());
  const bool may_start =
      s_->status.state() == JobStatus::RUNNING && s_->phase.kind() != Kind::kInterrupted;
  for (const WorkerState& w : worker_states_) {
    if (w.in_flight > 0 || w.info.left()) continue;  // its callback wakes the thread
    if (!RunsJobLocked(w)) {
      if (may_start) consider(w.next_probe);
    } else {
      consider(w.last_contact + kPingIdleAfter);
    }
  }
  if (s_->status.state() == JobStatus::RUNNING && s_->scheduler->Finished() &&
      options_.has_evaluator && !s_->final_eval) {
    consider(s_->training_end + options_.final_eval_timeout);
  }
  return next;
}

void Dispatcher::LeaseStepsLocked(int i, absl::Time now) {
  WorkerState& w = worker_states_[i];
  if (s_->status.state() != JobStatus::RUNNING || !RunsJobLocked(w) || !s_->phase.leasing() ||
      w.info.left()) {
    return;
  }
  const int depth = StepsInFlight(s_->job);
  while (w.in_flight < depth) {
    absl::Time deadline = now + absl::Milliseconds(s_->job.step_timeout_ms());
    std::optional<StepTask> task = s_->scheduler->Lease(i, deadline);
    if (!task.has_value()) return;
    RunStepOnLocked(i, *task, deadline);
  }
}

void Dispatcher::MarkFailedLocked(int i, const std::string& why) {
  s_->scheduler->RequeueWorker(i);
  WorkerState& w = worker_states_[i];
  if (w.info.left()) return;  // gone on purpose: not a failure
  w.info.set_state("failed");
  w.info.set_failures(w.info.failures() + 1);
  w.info.set_error(why);
  w.started_job.clear();
  w.next_probe = absl::Now() + options_.probe_interval;
  last_worker_error_ = absl::StrCat("worker ", i, ": ", why);
}

void Dispatcher::CallReturnedLocked() {
  --calls_in_flight_;
  s_->WakeDispatcherLocked();
}

void Dispatcher::PingWorkerLocked(int i) {
  WorkerState& w = worker_states_[i];
  w.last_contact = absl::Now();
  // The request and response live in the callback, which the worker interface deletes
  // once it has run.
  auto call = std::make_shared<std::pair<WorkerStatusRequest, WorkerStatusResponse>>();
  ++calls_in_flight_;
  workers_[i]->StatusAsync(&call->first, &call->second, absl::Now() + absl::Seconds(5),
                           [this, call](const absl::Status&) {
                             absl::MutexLock lock(&s_->mu);
                             --calls_in_flight_;
                           });
}

void Dispatcher::StartJobOnLocked(int i) {
  WorkerState& w = worker_states_[i];
  ++w.in_flight;
  w.last_contact = absl::Now();
  if (w.info.state() != "failed" && w.info.state() != "unreachable") {
    w.info.set_state("starting");
  }
  auto call = std::make_shared<std::pair<StartJobRequest, StartJobResponse>>();
  *call->first.mutable_job() = s_->job;
  for (const std::string& a : s_->ps_addresses) call->first.add_ps_addresses(a);
  std::string job_id = s_->job.job_id();
  const int64_t layout = s_->layout_version;
  ++calls_in_flight_;
  workers_[i]->StartJobAsync(&call->first, &call->second, absl::Now() + absl::Seconds(30),
                             [this, i, call, job_id, layout](const absl::Status& s) {
                               absl::MutexLock lock(&s_->mu);
                               OnJobStartedLocked(i, job_id, layout, s,
                                                  call->second.backend());
                               CallReturnedLocked();
                             });
}

void Dispatcher::OnJobStartedLocked(int i, const std::string& job_id, int64_t layout_version,
                                    const absl::Status& s, const std::string& backend) {
  WorkerState& w = worker_states_[i];
  --w.in_flight;
  if (s.ok() && layout_version != s_->layout_version) {
    // Started on the ps set before a scale: started again, with the new one.
    w.next_probe = absl::InfinitePast();
    return;
  }
  if (s.ok()) {
    w.started_job = job_id;
    w.refusals = 0;
    w.info.set_state("idle");
    w.info.set_error("");
    w.info.set_backend(backend);
    return;
  }
  const StepFailureKind kind = ClassifyStepFailure(s).kind;
  // A worker the chief cannot connect to that has not failed (one not up yet when the job
  // starts, say, as pods come up in any order) is unreachable, not failed.
  if (kind != StepFailureKind::kWorkerDown || w.info.state() == "failed") {
    w.info.set_state("failed");
  } else {
    w.info.set_state("unreachable");
  }
  w.info.set_error(std::string(s.message()));
  w.next_probe = absl::Now() + options_.probe_interval;
  if (kind != StepFailureKind::kStepFailed && kind != StepFailureKind::kIncompatible) return;
  // The worker is up but refuses the job (say, it cannot read the data, or speaks another
  // protocol). The others go on; when every worker has refused it max_step_attempts times
  // in a row, the job cannot run. (A ps it cannot reach is no refusal: the job waits for
  // the ps.)
  last_worker_error_ = absl::StrCat("worker ", i, ": ", s.message());
  ++w.refusals;
  const bool all_refuse =
      std::all_of(worker_states_.begin(), worker_states_.end(), [this](const WorkerState& x) {
        return x.info.left() || x.refusals >= options_.max_step_attempts;
      });
  if (all_refuse && s_->status.state() == JobStatus::RUNNING) {
    s_->scheduler->Cancel();
    s_->EndJobLocked(JobStatus::FAILED,
                     absl::StrCat("workers refuse the job: ", last_worker_error_));
  }
}

void Dispatcher::RunStepOnLocked(int i, const StepTask& task, absl::Time deadline) {
  WorkerState& w = worker_states_[i];
  ++w.in_flight;
  w.last_contact = absl::Now();
  w.info.set_state("busy");
  auto call = std::make_shared<std::pair<StepRequest, StepResponse>>();
  StepRequest& r = call->first;
  r.set_job_id(s_->job.job_id());
  r.set_step_id(task.step_id);
  r.set_epoch(task.epoch);
  r.set_batch_index(task.batch_index);
  r.set_min_version(task.min_version);
  r.set_sync(task.sync);
  r.set_sync_step(task.sync_step);
  r.set_replica(task.replica);
  r.set_generation(s_->generation);
  ++calls_in_flight_;
  workers_[i]->RunStepAsync(
      &call->first, &call->second, deadline, [this, i, call](const absl::Status& s) {
        absl::MutexLock lock(&s_->mu);
        OnStepDoneLocked(i, call->first, call->second, s);
        // The next steps go out from here, not from the thread's next round: a thread switch
        // less between one step's end and the next one's start. (The thread still runs, for
        // what this leaves: the job's end.) A worker with nothing in flight goes first, so
        // that workers beyond what keeps the steps busy (a sync job's replicas, a worker
        // that joined) share the steps rather than wait behind the one that just finished.
        if (!s_->stopping) {
          const absl::Time now = absl::Now();
          for (int j = 0; j < num_workers(); ++j) {
            if (j != i && worker_states_[j].in_flight == 0) LeaseStepsLocked(j, now);
          }
          LeaseStepsLocked(i, now);
        }
        CallReturnedLocked();
      });
}

void Dispatcher::OnStepDoneLocked(int i, const StepRequest& request,
                                  const StepResponse& response, const absl::Status& s) {
  WorkerState& w = worker_states_[i];
  --w.in_flight;
  if (request.job_id() != s_->job.job_id()) return;
  // A worker marked failed or restarting (by its other call, or an expired lease) keeps
  // that state until StartJob succeeds again.
  const bool running = RunsJobLocked(w);
  if (request.generation() != s_->generation) {
    // A step of the timeline before a rollback: whatever it did is gone (the ps refuse
    // its updates); its step runs again in this generation.
    if (running) SetRunningState(w.info, w.in_flight);
    return;
  }
  if (s.ok()) {
    if (running) SetRunningState(w.info, w.in_flight);
    OnStepCompletedLocked(i, request, response);
    return;
  }
  OnStepFailedLocked(i, request, s);
}

void Dispatcher::OnStepCompletedLocked(int i, const StepRequest& request,
                                       const StepResponse& response) {
  // With backup workers the completion that makes k of a sync step done makes its other
  // steps done too (superseded): the journal keeps the completions only, and a restore
  // from it supersedes the same steps again (Scheduler::Restore).
  if (!s_->scheduler->Complete(request.step_id(), i)) return;
  if (s_->store != nullptr) {
    absl::Status journal = s_->store->Journal(request.step_id());
    if (!journal.ok() && s_->status.checkpoint_error().empty()) {
      s_->status.set_checkpoint_error(absl::StrCat("step journal: ", journal.message()));
    }
  }
  WorkerState& w = worker_states_[i];
  w.info.set_steps_done(w.info.steps_done() + 1);
  recent_.push_back(response);
  while (recent_.size() > 50) recent_.pop_front();
  absl::Time now = absl::Now();
  progress_.emplace_back(now, s_->scheduler->done_steps());
  while (progress_.size() > 2 && now - progress_.front().first > absl::Seconds(10)) {
    progress_.pop_front();
  }
  if (s_->scheduler->Finished() || s_->store != nullptr) s_->WakeControlLocked();
}

void Dispatcher::OnStepFailedLocked(int i, const StepRequest& request, const absl::Status& s) {
  WorkerState& w = worker_states_[i];
  const bool running = RunsJobLocked(w);
  s_->scheduler->Requeue(request.step_id(), i);
  const StepFailure failure = ClassifyStepFailure(s);
  switch (failure.kind) {
    case StepFailureKind::kUnknownJob:
      // The worker restarted and lost the job: start it again (once its other calls are
      // back). Its other steps cannot run there either.
      s_->scheduler->RequeueWorker(i);
      w.started_job.clear();
      w.info.set_state("starting");
      w.next_probe = absl::InfinitePast();
      return;
    case StepFailureKind::kWorkerDown:
      // Once per failure: the worker's other calls fail the same way when it is down.
      if (running) MarkFailedLocked(i, s.ToString());
      return;
    case StepFailureKind::kIncompatible:
      // The worker speaks another protocol than a ps (or than this chief): no step can
      // run there, and none of this counts against the step. Probed again later (a
      // rolling upgrade may replace either side).
      if (running) MarkFailedLocked(i, std::string(s.message()));
      return;
    case StepFailureKind::kPsUnavailable:
      // Not the worker's fault, nor the step's: the monitor looks at that ps now, and
      // the job pauses while it is unreachable.
      if (running) SetRunningState(w.info, w.in_flight);
      last_worker_error_ = absl::StrCat("worker ", i, ": ", s.message());
      recovery_->ProbeNow();
      return;
    case StepFailureKind::kPsStateLost:
      if (running) SetRunningState(w.info, w.in_flight);
      RecoveryLockHeld();
      recovery_->PsStateLostLocked(failure.ps_task, s.message());
      return;
    case StepFailureKind::kStale:
      if (running) SetRunningState(w.info, w.in_flight);
      return;
    default:
      break;
  }
  if (running) SetRunningState(w.info, w.in_flight);
  if (s_->scheduler->IsDone(request.step_id())) {
    // Nothing is left to fail: the step was done meanwhile, by another worker or, with
    // backup workers, by the k replicas of its sync step that arrived first (a straggler
    // then pulls parameters that have moved on too far: FAILED_PRECONDITION). The worker
    // takes its next step.
    return;
  }
  int attempts = ++step_attempts_[request.step_id()];
  last_worker_error_ = absl::StrCat("worker ", i, ": ", s.message());
  if (attempts >= options_.max_step_attempts && s_->status.state() == JobStatus::RUNNING) {
    s_->scheduler->Cancel();
    s_->EndJobLocked(JobStatus::FAILED,
                     absl::StrCat("step ", request.step_id(), " failed ", attempts,
                                  " times; last on worker ", i, ": ", s.ToString()));
  }
}

void Dispatcher::CancelCalls() {
  std::vector<WorkerInterface*> workers;
  {
    absl::MutexLock lock(&s_->mu);
    workers = workers_;
  }
  // Without the mutex: a cancelled call's callback, which takes it, may run inside CancelAll.
  for (WorkerInterface* worker : workers) worker->CancelAll();
}

void Dispatcher::WaitForCalls() {
  absl::MutexLock lock(&s_->mu);
  auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) { return calls_in_flight_ == 0; };
  // Every call has a deadline, by which its worker interface answers it: this ends. A slow
  // one is said, not given up on: a callback must never reach a destroyed chief.
  while (!s_->mu.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(30))) {
    LogWarning() << "stopping: still waiting for " << calls_in_flight_
                 << " calls to workers to return";
  }
}

void Dispatcher::AddToStatusLocked(JobStatus* s) const {
  for (const WorkerState& w : worker_states_) *s->add_workers() = w.info;
  // Speed over the last ~10 s of completions.
  if (progress_.size() >= 2) {
    double dt = absl::ToDoubleSeconds(progress_.back().first - progress_.front().first);
    double steps = progress_.back().second - progress_.front().second;
    if (dt > 0) {
      s->set_steps_per_sec(steps / dt);
      s->set_examples_per_sec(steps / dt * s_->job.batch_size());
    }
  }
  if (recent_.empty()) return;
  double loss = 0, correct = 0, examples = 0, pull = 0, compute = 0, push = 0;
  for (const StepResponse& r : recent_) {
    loss += r.loss() * r.examples();
    correct += r.correct();
    examples += r.examples();
    pull += r.pull_ms();
    compute += r.compute_ms();
    push += r.push_ms();
  }
  s->set_pull_ms(pull / recent_.size());
  s->set_compute_ms(compute / recent_.size());
  s->set_push_ms(push / recent_.size());
  if (examples > 0) {
    s->set_loss(loss / examples);
    s->set_accuracy(correct / examples);
  }
}

bool Dispatcher::AnyWorkerRunsJobLocked() const {
  for (const WorkerState& w : worker_states_) {
    if (RunsJobLocked(w)) return true;
  }
  return false;
}

}  // namespace shardps
