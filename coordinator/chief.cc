// ChiefImpl puts the chief's parts together under one mutex (ChiefState::mu): a submitted job
// is prepared (job_preparation.h) and installed; the dispatcher (dispatcher.h) runs its steps
// on a thread of its own; a control thread takes its checkpoints (checkpointing.h) and its
// recoveries (recovery.h), one at a time; the ps monitor (ps_monitor.h) wakes both.
#include "coordinator/chief.h"

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/checkpointing.h"
#include "coordinator/chief_state.h"
#include "coordinator/dispatcher.h"
#include "coordinator/job_phase.h"
#include "coordinator/job_preparation.h"
#include "coordinator/job_spec.h"
#include "client/switchable_ps_client.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/ps_scaling.h"
#include "coordinator/table_moves.h"
#include "coordinator/recovery.h"

namespace shardps {
namespace {

using Kind = JobPhase::Kind;

// How long, with no worker running the job, before the status says so.
constexpr absl::Duration kNoWorkerGrace = absl::Seconds(5);
// How long the end of a job keeps telling a worker that has not answered to shut down, and
// how long between the tries.
constexpr absl::Duration kShutdownPatience = absl::Seconds(15);
constexpr absl::Duration kShutdownRetryDelay = absl::Milliseconds(250);

// A worker's Shutdown that failed on the way (not by the worker's answer): worth a retry.
bool ShutdownDidNotArrive(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsResourceExhausted(s);
}

// Whether a worker's TF_CONFIG ps list `theirs` is of this cluster: the same ps in the same
// order as `ours`, one list possibly longer (a worker started before or after a scale).
bool SamePsCluster(const std::vector<std::string>& theirs, const std::vector<std::string>& ours) {
  const size_t n = std::min(theirs.size(), ours.size());
  return n > 0 && std::equal(theirs.begin(), theirs.begin() + n, ours.begin());
}

std::vector<WorkerInterface*> Pointers(const std::vector<std::unique_ptr<WorkerInterface>>& v) {
  std::vector<WorkerInterface*> out;
  for (const auto& p : v) out.push_back(p.get());
  return out;
}

class ChiefImpl : public Chief {
 public:
  explicit ChiefImpl(Options options)
      : options_(std::move(options)),
        ps_(std::make_unique<SwitchablePsClient>(
            std::shared_ptr<PsClient>(options_.ps, [](PsClient*) {}))) {
    {
      absl::MutexLock lock(&s_.mu);
      s_.ps_addresses = options_.ps_addresses;
    }
    PsMonitor::Options monitor;
    monitor.interval = options_.probe_interval_ps;
    monitor.unreachable_after = options_.ps_unreachable_after;
    monitor.probe_timeout = std::max(absl::Seconds(1), options_.probe_interval_ps * 2);
    monitor_ = std::make_unique<PsMonitor>(ps_.get(), monitor, [this] {
      absl::MutexLock lock(&s_.mu);
      s_.WakeControlLocked();
      s_.WakeDispatcherLocked();
    });
    recovery_ = std::make_unique<Recovery>(&s_, monitor_.get(), ps_.get());
    checkpoints_ = std::make_unique<CheckpointDriver>(&s_, recovery_.get(), ps_.get());
    Dispatcher::Options dispatch;
    dispatch.probe_interval = options_.probe_interval;
    dispatch.max_step_attempts = options_.max_step_attempts;
    dispatch.has_evaluator = options_.has_evaluator;
    dispatch.final_eval_timeout = options_.final_eval_timeout;
    dispatcher_ = std::make_unique<Dispatcher>(&s_, Pointers(options_.workers), recovery_.get(),
                                               std::move(dispatch));
    PsScaling::Options scaling;
    scaling.connect_ps = options_.connect_ps;
    scaling.cluster_ps = options_.ps_addresses;
    scaling.default_timeout = options_.scale_timeout;
    scaling_ = std::make_unique<PsScaling>(&s_, ps_.get(), monitor_.get(), recovery_.get(),
                                           checkpoints_.get(), dispatcher_.get(),
                                           std::move(scaling));
    moves_ = std::make_unique<TableMoves>(&s_, ps_.get(), recovery_.get());
  }

  // The threads return once the chief is stopping; then every call to a worker is cancelled
  // and waited for (each comes back soon, its step unfinished as far as this chief knows),
  // so that no callback outlives what it touches; the monitor goes last, as callbacks ask it
  // to probe.
  ~ChiefImpl() override {
    {
      absl::MutexLock lock(&s_.mu);
      s_.stopping = true;
    }
    if (dispatch_thread_.joinable()) dispatch_thread_.join();
    if (control_thread_.joinable()) control_thread_.join();
    dispatcher_->CancelCalls();
    dispatcher_->WaitForCalls();
    monitor_.reset();
  }

  absl::StatusOr<SubmitJobResponse> Submit(const std::string& job_json,
                                           SubmitJobRequest::Resume resume) override {
    ASSIGN_OR_RETURN(JobSpec job, ParseJobSpec(job_json, num_workers()));
    ApplyCheckpointDefaults(&job);
    RETURN_IF_ERROR(ConfineJobPaths(&job));
    Kind before;
    {
      absl::MutexLock lock(&s_.mu);
      // A job that ended drains its calls first (each bounded by its deadline).
      auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
        return s_.stopping || s_.phase.kind() != Kind::kEnding;
      };
      s_.mu.Await(absl::Condition(&settled));
      if (s_.status.state() == JobStatus::RUNNING || s_.phase.kind() == Kind::kStarting) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job \"", s_.status.job_id(), "\" is still running; cancel it or wait"));
      }
      if (s_.stopping) return absl::UnavailableError("the chief is stopping");
      before = s_.phase.kind();
      s_.SetPhaseLocked(Kind::kStarting);
    }
    absl::StatusOr<SubmitJobResponse> response = Start(std::move(job), resume);
    absl::MutexLock lock(&s_.mu);
    if (!response.ok() && s_.phase.kind() == Kind::kStarting) s_.SetPhaseLocked(before);
    return response;
  }

  absl::StatusOr<JoinJobResponse> Join(const JoinJobRequest& request) override {
    if (request.task_index() < 0 || request.address().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "JoinJob: task_index must be >= 0 and address set, got ", request.task_index(),
          " and \"", request.address(), "\""));
    }
    const std::string who =
        absl::StrCat("worker ", request.task_index(), " at ", request.address());
    // An address to bind, not to reach (a worker listening on every interface that sent what
    // it bound instead of its TF_CONFIG address).
    const std::string host = request.address().substr(0, request.address().rfind(':'));
    if (host == "0.0.0.0" || host == "[::]" || host == "::" ||
        absl::EndsWith(request.address(), ":0")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "JoinJob: ", who, ": not an address the chief can reach (give TF_CONFIG's)"));
    }
    absl::MutexLock lock(&s_.mu);
    PartsLockHeld();
    const std::vector<std::string> theirs(request.ps_addresses().begin(),
                                          request.ps_addresses().end());
    if (!theirs.empty() && !SamePsCluster(theirs, options_.ps_addresses) &&
        !SamePsCluster(theirs, s_.ps_addresses)) {
      return absl::FailedPreconditionError(absl::StrCat(
          who, " names ps [", absl::StrJoin(theirs, ", "),
          "] in its TF_CONFIG, but this job's ps are [", absl::StrJoin(s_.ps_addresses, ", "),
          "]: a worker of another job or cluster"));
    }
    const JobStatus::State state = s_.status.state();
    if (!options_.long_lived && state != JobStatus::RUNNING && state != JobStatus::NO_JOB) {
      return absl::FailedPreconditionError(
          absl::StrCat(who, " arrived after job \"", s_.status.job_id(), "\" ended (",
                       JobStatus::State_Name(state), "): nothing to join"));
    }
    const int slot = dispatcher_->FindWorkerLocked(request.task_index());
    WorkerInterface* worker = nullptr;
    if (slot >= 0) {
      const std::string known = dispatcher_->AddressLocked(slot);
      if (known != request.address() && dispatcher_->LiveLocked(slot)) {
        return absl::AlreadyExistsError(absl::StrCat(
            who, ": worker ", request.task_index(), " is live at ", known,
            " and runs the job; give the new worker another task index"));
      }
      worker = known == request.address() ? dispatcher_->WorkerLocked(slot) : nullptr;
    }
    if (worker == nullptr) {
      if (!options_.connect_worker) {
        return absl::UnimplementedError(absl::StrCat(who, ": this chief takes no new workers"));
      }
      joined_.push_back(options_.connect_worker(request.address()));
      worker = joined_.back().get();
    }
    if (slot >= 0) {
      dispatcher_->RejoinLocked(slot, worker);
    } else {
      dispatcher_->AddWorkerLocked(worker, request.task_index(), "joined");
    }
    ++worker_joins_;
    LogInfo() << who << (slot >= 0 ? " rejoined" : " joined") << " ("
              << dispatcher_->num_workers_not_left() << " workers)";
    JoinJobResponse response;
    if (state == JobStatus::RUNNING) response.set_job_id(s_.status.job_id());
    response.set_workers(dispatcher_->num_workers_not_left());
    return response;
  }

  absl::StatusOr<LeaveJobResponse> Leave(const LeaveJobRequest& request) override {
    absl::MutexLock lock(&s_.mu);
    PartsLockHeld();
    const int slot = dispatcher_->FindWorkerLocked(request.task_index());
    if (slot < 0 || (!request.address().empty() &&
                     dispatcher_->AddressLocked(slot) != request.address())) {
      return absl::NotFoundError(absl::StrCat("LeaveJob: no worker ", request.task_index(),
                                              " at ", request.address(), " in this job"));
    }
    const absl::Duration wait = request.wait_ms() > 0
                                    ? absl::Milliseconds(request.wait_ms())
                                    : absl::Milliseconds(std::max<int64_t>(
                                          s_.job.step_timeout_ms(), 1000));
    LeaveJobResponse response;
    response.set_steps_handed_back(dispatcher_->LeaveLocked(slot, absl::Now() + wait));
    ++worker_leaves_;
    LogInfo() << "worker " << request.task_index() << " at " << request.address() << " left ("
              << response.steps_handed_back() << " leased steps handed back, "
              << dispatcher_->num_workers_not_left() << " workers)";
    return response;
  }

  void ScalePs(const ScalePsRequest& request,
               std::function<void(absl::StatusOr<ScalePsResponse>)> done) override {
    absl::Status refused;
    {
      absl::MutexLock lock(&s_.mu);
      PartsLockHeld();
      refused = scaling_->RequestLocked(request, done);
      if (refused.ok()) return;
    }
    LogWarning() << "scale-ps " << request.num_ps() << " refused: " << refused;
    done(refused);
  }

  void MoveTableBuckets(
      const MoveTableBucketsRequest& request,
      std::function<void(absl::StatusOr<MoveTableBucketsResponse>)> done) override {
    absl::Status refused;
    {
      absl::MutexLock lock(&s_.mu);
      PartsLockHeld();
      if (scaling_->pending()) {
        refused = absl::FailedPreconditionError(
            "move-buckets: a scale-ps is under way; move once it has ended");
      } else {
        refused = moves_->RequestLocked(request, done);
        if (refused.ok()) return;
      }
    }
    LogWarning() << "move-buckets of \"" << request.variable() << "\" refused: " << refused;
    done(refused);
  }

  JobStatus Status() override {
    std::vector<PsMonitor::PsView> views = monitor_->Views();
    absl::MutexLock lock(&s_.mu);
    return StatusLocked(views);
  }

  absl::StatusOr<int64_t> AddSteps(const std::string& job_id, int64_t steps) override {
    if (steps <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("steps must be > 0, got ", steps));
    }
    absl::MutexLock lock(&s_.mu);
    RETURN_IF_ERROR(s_.CheckJobLocked(job_id));
    if (s_.status.state() != JobStatus::RUNNING || s_.scheduler->Finished()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job \"", s_.status.job_id(), "\" is not running; steps cannot be added"));
    }
    int64_t total = s_.scheduler->AddSteps(steps);
    if (s_.store != nullptr) {
      s_.store_state.total_steps = total;
      s_.WriteStateLocked();
    }
    s_.WakeDispatcherLocked();
    return total;
  }

  absl::Status Cancel(const std::string& job_id) override {
    absl::MutexLock lock(&s_.mu);
    RETURN_IF_ERROR(s_.CheckJobLocked(job_id));
    if (s_.status.state() != JobStatus::RUNNING) {
      return absl::FailedPreconditionError(
          absl::StrCat("job \"", s_.status.job_id(), "\" is not running"));
    }
    std::string why = "cancelled by request";
    if (s_.store != nullptr && s_.scheduler->Finished() && !s_.phase.final_checkpoint_done()) {
      // Trained, and the final checkpoint never committed: the ps' state goes with the job.
      why = absl::StrCat(
          why, "; the final checkpoint was never committed (", s_.status.checkpoint_error(),
          "): the trained state after step ", s_.scheduler->done_steps(), " is not saved; ",
          s_.status.has_checkpoint()
              ? absl::StrCat("the newest checkpoint is ", s_.status.last_checkpoint().id(),
                             " at step ", s_.status.last_checkpoint().steps_done())
              : std::string("no checkpoint was committed"));
    }
    s_.scheduler->Cancel();
    s_.EndJobLocked(JobStatus::CANCELLED, why);
    return absl::OkStatus();
  }

  absl::Status ReportEval(const ReportEvalRequest& request) override {
    absl::MutexLock lock(&s_.mu);
    JobStatus& status = s_.status;
    if (request.job_id() != status.job_id()) {
      return absl::NotFoundError(
          absl::StrCat("job \"", request.job_id(), "\" is not the current job"));
    }
    if (!status.has_eval() || request.result().step() >= status.last_eval().step() ||
        request.final()) {
      *status.mutable_last_eval() = request.result();
      status.set_has_eval(true);
    }
    // keep_best: an evaluation of a checkpoint (the sidecar evaluator's) rates it.
    const EvalMetrics& r = request.result();
    if (s_.store != nullptr && r.checkpoint_id() > 0 &&
        (s_.store_state.best_checkpoint == 0 || r.accuracy() > s_.store_state.best_accuracy)) {
      s_.store_state.best_checkpoint = r.checkpoint_id();
      s_.store_state.best_accuracy = r.accuracy();
      s_.WriteStateLocked();
    }
    if (request.final()) s_.final_eval = true;
    s_.WakeDispatcherLocked();
    return absl::OkStatus();
  }

  void Checkpoint(const std::string& job_id,
                  std::function<void(absl::StatusOr<CheckpointInfo>)> done) override {
    absl::Status refused;
    {
      absl::MutexLock lock(&s_.mu);
      refused = s_.CheckJobLocked(job_id);
      if (refused.ok() && s_.status.state() != JobStatus::RUNNING) {
        refused = absl::FailedPreconditionError(
            absl::StrCat("job \"", s_.status.job_id(), "\" is not running"));
      }
      if (refused.ok() && s_.store == nullptr) {
        const std::string& error = s_.status.checkpoint_error();
        refused = absl::FailedPreconditionError(absl::StrCat(
            "job \"", s_.status.job_id(), "\" has no checkpoint directory (job file field "
            "\"checkpoint.dir\", or the chief's --checkpoint_dir)",
            error.empty() ? "" : ": ", error));
      }
      if (refused.ok()) {
        PartsLockHeld();
        checkpoints_->RequestLocked(std::move(done));
        s_.WakeControlLocked();
        return;
      }
    }
    done(refused);
  }

  bool Interrupt(absl::Duration timeout) override {
    auto taken = std::make_shared<absl::Notification>();
    bool checkpointing = false;
    {
      absl::MutexLock lock(&s_.mu);
      if (s_.status.state() != JobStatus::RUNNING) return false;
      checkpointing = s_.store != nullptr;
      if (checkpointing) {
        PartsLockHeld();
        // Answered once committed or failed, or when the job stops first.
        checkpoints_->RequestInterruptLocked(
            [taken](const absl::StatusOr<CheckpointInfo>&) { taken->Notify(); });
        s_.WakeControlLocked();
      }
    }
    if (checkpointing && !taken->WaitForNotificationWithTimeout(timeout)) {
      LogWarning() << "no checkpoint within " << timeout
                   << " of the interrupt; the restarted chief resumes from the last one";
    }
    // Stop dispatching; calls in flight finish on the workers. The job stays RUNNING in the
    // checkpoint directory's eyes: a restarted chief resumes it.
    absl::MutexLock lock(&s_.mu);
    s_.SetPhaseLocked(Kind::kInterrupted);
    s_.WakeDispatcherLocked();
    return true;
  }

  bool WaitForJobEnd(absl::Duration timeout) override {
    absl::MutexLock lock(&s_.mu);
    auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
      return s_.phase.kind() == Kind::kEnded;
    };
    return s_.mu.AwaitWithTimeout(absl::Condition(&ended), timeout);
  }

  void ShutdownCluster(const std::string& reason) override {
    // Each worker is told until it answers, for up to kShutdownPatience: one lost Shutdown
    // (a busy worker past the deadline, a channel between connections) would leave that
    // worker waiting for steps forever. A worker that is gone costs the patience, once; one
    // that left is not told.
    std::vector<WorkerInterface*> workers;
    {
      absl::MutexLock lock(&s_.mu);
      PartsLockHeld();
      workers = dispatcher_->WorkersNotLeftLocked();
    }
    const size_t n = workers.size();
    std::vector<bool> told(n, false);
    const absl::Time give_up = absl::Now() + kShutdownPatience;
    for (int round = 0;; ++round) {
      std::vector<WorkerShutdownRequest> requests(n);
      std::vector<WorkerShutdownResponse> responses(n);
      std::vector<absl::Status> results(n);
      std::vector<absl::Notification> done(n);
      for (size_t i = 0; i < n; ++i) {
        if (told[i]) {
          done[i].Notify();
          continue;
        }
        requests[i].set_reason(reason);
        workers[i]->ShutdownAsync(
            &requests[i], &responses[i], std::min(give_up, absl::Now() + absl::Seconds(5)),
            [&done, &results, i](const absl::Status& s) {
              results[i] = s;
              done[i].Notify();
            });
      }
      for (auto& d : done) d.WaitForNotification();
      std::vector<std::string> untold;
      for (size_t i = 0; i < n; ++i) {
        if (told[i]) continue;
        // UNIMPLEMENTED or PERMISSION_DENIED will not change: the worker heard us.
        told[i] = results[i].ok() || !ShutdownDidNotArrive(results[i]);
        if (!told[i]) {
          untold.push_back(absl::StrCat(i, " (", results[i].ToString(), ")"));
        }
      }
      if (untold.empty()) break;
      if (absl::Now() + kShutdownRetryDelay >= give_up) {
        LogWarning() << "workers " << absl::StrJoin(untold, ", ")
                     << " did not acknowledge the shutdown; they keep waiting for steps";
        break;
      }
      absl::SleepFor(kShutdownRetryDelay);
    }
    (void)ps_->ShutdownAll(reason);
    // TF_CONFIG's ps the job does not run on (num_ps, a scale down) are told too.
    std::vector<std::string> idle;
    {
      absl::MutexLock lock(&s_.mu);
      for (const std::string& a : options_.ps_addresses) {
        if (std::find(s_.ps_addresses.begin(), s_.ps_addresses.end(), a) ==
            s_.ps_addresses.end()) {
          idle.push_back(a);
        }
      }
    }
    if (!idle.empty() && options_.connect_ps) {
      absl::StatusOr<std::shared_ptr<PsClient>> others = options_.connect_ps(idle);
      if (others.ok()) (void)(*others)->ShutdownAll(reason);
    }
  }

 private:
  // The workers a job may count on now (TF_CONFIG's and those that joined, less those that
  // left): a sync job's replicas are checked against it at submit.
  int num_workers() ABSL_LOCKS_EXCLUDED(s_.mu) {
    absl::MutexLock lock(&s_.mu);
    PartsLockHeld();
    return dispatcher_->num_workers_not_left();  // 0: none known yet (all will join)
  }

  // The parts share s_.mu (each was given &s_): says so to the thread-safety analysis, which
  // cannot see through their pointers.
  void PartsLockHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu)
      ABSL_ASSERT_EXCLUSIVE_LOCK(recovery_->mu(), checkpoints_->mu(), dispatcher_->mu(),
                                 scaling_->mu(), moves_->mu()) {
    s_.mu.AssertHeld();
  }

  // The job's durable state (its checkpoints, a warm start's source) inside the data root,
  // and its dataset inside it or a dataset root, as resolved there; else PERMISSION_DENIED
  // naming the field.
  absl::Status ConfineJobPaths(JobSpec* job) const {
    if (!job->data_dir().empty()) {
      ASSIGN_OR_RETURN(std::string dir,
                       options_.data_root.ResolveInput(job->data_dir(), "job: \"data_dir\""));
      job->set_data_dir(dir);
    }
    if (!job->checkpoint().dir().empty()) {
      ASSIGN_OR_RETURN(std::string dir, options_.data_root.Resolve(job->checkpoint().dir(),
                                                                   "job: \"checkpoint.dir\""));
      job->mutable_checkpoint()->set_dir(dir);
    }
    if (job->has_warm_start() && !job->warm_start().from().empty()) {
      ASSIGN_OR_RETURN(std::string from, options_.data_root.Resolve(job->warm_start().from(),
                                                                    "job: \"warm_start.from\""));
      job->mutable_warm_start()->set_from(from);
    }
    return absl::OkStatus();
  }

  // The job file may give a schedule; the chief's --checkpoint_dir gives the place.
  void ApplyCheckpointDefaults(JobSpec* job) const {
    if (!job->checkpoint().dir().empty() || options_.default_checkpoint_dir.empty()) return;
    CheckpointSpec* checkpoint = job->mutable_checkpoint();
    checkpoint->set_dir(options_.default_checkpoint_dir);
    if (checkpoint->every_steps() == 0 && checkpoint->every_seconds() == 0) {
      checkpoint->set_every_seconds(absl::ToDoubleSeconds(options_.default_checkpoint_every));
    }
    if (checkpoint->keep() == 0) checkpoint->set_keep(3);
  }

  // Prepares the job (holding no lock), then installs it. REQUIRES: phase kStarting.
  absl::StatusOr<SubmitJobResponse> Start(JobSpec job, SubmitJobRequest::Resume resume) {
    PrepareOptions prepare;
    prepare.ps = ps_.get();
    prepare.ps_unreachable_after = options_.ps_unreachable_after;
    prepare.cluster_ps = options_.ps_addresses;
    {
      absl::MutexLock lock(&s_.mu);
      prepare.current_ps = s_.ps_addresses;
    }
    if (options_.connect_ps) {
      prepare.use_ps = [this](const std::vector<std::string>& addresses) -> absl::Status {
        ASSIGN_OR_RETURN(std::shared_ptr<PsClient> client, options_.connect_ps(addresses));
        ps_->Switch(std::move(client));
        {
          absl::MutexLock lock(&s_.mu);
          s_.ps_addresses = addresses;
        }
        monitor_->Reset();
        return absl::OkStatus();
      };
    }
    ASSIGN_OR_RETURN(PreparedJob prepared, PrepareJob(std::move(job), resume, prepare));
    SubmitJobResponse response = prepared.response;
    if (response.already_finished()) {
      absl::MutexLock lock(&s_.mu);
      EndFinishedJobLocked(prepared);
      LogInfo() << "job " << prepared.job.job_id() << " had already finished ("
                << prepared.state.total_steps << " steps); nothing to train";
      return response;
    }
    RefreshPsViews();
    absl::MutexLock lock(&s_.mu);
    InstallLocked(std::move(prepared));
    return response;
  }

  // The job runs: its state replaces the last job's, and its threads start.
  void InstallLocked(PreparedJob prepared) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
    JoinThreadsLocked();
    PartsLockHeld();
    const JobSpec& job = prepared.job;
    s_.job = job;
    s_.defs = std::move(prepared.defs);
    s_.scheduler = std::move(prepared.scheduler);
    s_.store = std::move(prepared.store);
    s_.store_state = prepared.state;
    s_.generation = prepared.generation;
    s_.ps_addresses = prepared.ps_addresses;
    s_.layout_version = prepared.layout_version;
    s_.dense_ps = prepared.dense_ps;
    checkpoints_->StartJobLocked();
    recovery_->StartJobLocked(std::move(prepared.incarnations));
    s_.status = JobStatus();
    s_.status.set_state(JobStatus::RUNNING);
    s_.status.set_job_id(job.job_id());
    s_.status.set_name(job.name());
    s_.status.set_steps_per_epoch(prepared.steps_per_epoch);
    s_.status.set_mode(JobSpec::Mode_Name(job.mode()));
    s_.status.set_checkpoint_error(prepared.checkpoint_error);
    s_.status.set_resumed_from(prepared.response.resumed_from());
    // The recoveries before a chief restart, from the job's journal.
    for (const JobStore::State::Recovery& r : prepared.state.recoveries) {
      RecoveryInfo* info = s_.status.add_recoveries();
      info->set_unix_time(r.unix_time);
      info->set_cause(r.cause);
      info->set_action(r.action);
      info->set_steps_lost(r.steps_lost);
      info->set_seconds(r.seconds);
    }
    s_.status.set_steps_lost(prepared.state.steps_lost);
    if (s_.store != nullptr && !s_.store_state.ended.empty()) {
      s_.store_state.ended.clear();  // submitted again: it runs
      s_.WriteStateLocked();
    }
    *s_.status.mutable_job() = job;
    s_.start = absl::Now();
    s_.final_eval = false;
    s_.training_end = absl::InfiniteFuture();
    dispatcher_->StartJobLocked();
    s_.SetPhaseLocked(Kind::kTraining);
    dispatch_thread_ = std::thread([this] { dispatcher_->Run(); });
    control_thread_ = std::thread([this] { Control(); });
  }

  // A job whose checkpoint directory says it finished: reported as SUCCEEDED, not trained.
  void EndFinishedJobLocked(const PreparedJob& prepared) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
    JoinThreadsLocked();
    const JobSpec& job = prepared.job;
    s_.job = job;
    s_.scheduler.reset();
    s_.store.reset();
    s_.status = JobStatus();
    s_.status.set_state(JobStatus::SUCCEEDED);
    s_.status.set_job_id(job.job_id());
    s_.status.set_name(job.name());
    s_.status.set_steps_per_epoch(prepared.steps_per_epoch);
    s_.status.set_mode(JobSpec::Mode_Name(job.mode()));
    s_.status.set_steps_done(prepared.state.total_steps);
    s_.status.set_total_steps(prepared.state.total_steps);
    s_.status.set_training_done(true);
    s_.status.set_resumed_from(prepared.response.resumed_from());
    *s_.status.mutable_job() = job;
    s_.start = s_.end = absl::Now();
    s_.training_end = s_.end;
    s_.SetPhaseLocked(Kind::kEnded);
  }

  // Every ps has just answered the job's start, but the monitor may not have seen one up
  // yet: its probes back off while a ps is down, as while the ps were starting. Its stale
  // "down" would pause the job for a ps that is up: have it probe now, and wait (at most
  // ps_unreachable_after) until every ps has answered it.
  void RefreshPsViews() {
    const absl::Time asked = absl::Now();
    const absl::Time deadline = asked + options_.ps_unreachable_after;
    monitor_->ProbeNow();
    while (absl::Now() < deadline) {
      bool fresh = true;
      for (const PsMonitor::PsView& v : monitor_->Views()) fresh &= v.up && v.last_up >= asked;
      if (fresh) return;
      absl::SleepFor(absl::Milliseconds(5));
    }
  }

  // The last job's threads have returned (its phase has ended) or the chief stops.
  void JoinThreadsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
    if (!dispatch_thread_.joinable() && !control_thread_.joinable()) return;
    s_.mu.Unlock();
    if (dispatch_thread_.joinable()) dispatch_thread_.join();
    if (control_thread_.joinable()) control_thread_.join();
    s_.mu.Lock();
  }

  // The control thread: checkpoints and recoveries, one at a time, for the current job. It
  // looks again on a wake-up (a step's completion, a request, a ps's change) and every
  // 200 ms besides: the monitor tells a ps's restart only by its next probe (see
  // Recovery), and a paused job's text says for how long a ps has been unreachable.
  void Control() {
    absl::MutexLock lock(&s_.mu);
    PartsLockHeld();
    absl::Time retry_recovery = absl::InfinitePast();
    while (!s_.stopping && s_.phase.active()) {
      if (s_.status.state() == JobStatus::RUNNING && s_.phase.kind() != Kind::kInterrupted) {
        recovery_->UpdatePsPhaseLocked();
        if (recovery_->pending() && absl::Now() >= retry_recovery) {
          switch (recovery_->RecoverLocked()) {
            case Recovery::Result::kRecovered:
              checkpoints_->RolledBackLocked();
              break;
            case Recovery::Result::kRetryLater:
              retry_recovery = absl::Now() + absl::Seconds(1);
              break;
            case Recovery::Result::kStopped:
              break;
          }
          continue;
        }
        if (!recovery_->pending() && scaling_->pending() &&
            s_.phase.kind() == Kind::kTraining) {
          scaling_->RunLocked();
          continue;
        }
        if (!recovery_->pending() && moves_->pending() && s_.phase.kind() == Kind::kTraining) {
          moves_->RunLocked();
          continue;
        }
        if (!recovery_->pending() && s_.phase.kind() != Kind::kPsUnreachable) {
          const char* why = checkpoints_->DueLocked();
          if (why != nullptr) {
            checkpoints_->RunLocked(why);
            continue;
          }
        }
      }
      if (s_.status.state() != JobStatus::RUNNING || s_.phase.kind() == Kind::kInterrupted) {
        checkpoints_->FailRequestsLocked();
        scaling_->FailRequestsLocked();
        moves_->FailRequestsLocked();
      }
      s_.control_wake = false;
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
        return s_.control_wake || s_.stopping || !s_.phase.active();
      };
      s_.mu.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(200));
    }
    checkpoints_->FailRequestsLocked();
    scaling_->FailRequestsLocked();
    moves_->FailRequestsLocked();
  }

  JobStatus StatusLocked(const std::vector<PsMonitor::PsView>& views) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
    PartsLockHeld();
    JobStatus s = s_.status;
    dispatcher_->AddToStatusLocked(&s);
    s.set_worker_joins(worker_joins_);
    s.set_worker_leaves(worker_leaves_);
    recovery_->AddPsToStatusLocked(views, &s);
    scaling_->AddToStatusLocked(&s);
    moves_->AddToStatusLocked(&s);
    s.set_generation(s_.generation);
    const absl::Time now = absl::Now();
    if (s_.status.state() == JobStatus::RUNNING) s.set_phase(PhaseTextLocked(now));
    if (s_.scheduler != nullptr) {
      s.set_steps_done(s_.scheduler->done_steps());
      s.set_total_steps(s_.scheduler->total_steps());
      s.set_steps_requeued(s_.scheduler->requeued());
      s.set_training_done(s_.scheduler->Finished());
    }
    if (s_.status.state() != JobStatus::NO_JOB) {
      const absl::Time end = s_.phase.active() ? now : s_.end;
      s.set_elapsed_s(absl::ToDoubleSeconds(std::min(end, s_.training_end) - s_.start));
    }
    const std::string& worker_error = dispatcher_->last_worker_error();
    if (s.error().empty() && s_.status.state() == JobStatus::RUNNING && !worker_error.empty() &&
        s_.phase.held()) {
      s.set_error(worker_error);
    }
    return s;
  }

  // JobStatus.phase of a running job: its phase's text, or, while training, that no worker
  // runs it (after a grace period at its start).
  std::string PhaseTextLocked(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_.mu) {
    PartsLockHeld();
    std::string phase = s_.phase.Text();
    if (!phase.empty() || s_.scheduler == nullptr || s_.scheduler->Finished()) return phase;
    if (dispatcher_->AnyWorkerRunsJobLocked() || now - s_.start <= kNoWorkerGrace) return phase;
    const std::string& error = dispatcher_->last_worker_error();
    return absl::StrCat("waiting for workers: none runs the job",
                        error.empty() ? "" : " (last error: ", error, error.empty() ? "" : ")");
  }

  Options options_;
  // The client the job's parts use: options_.ps, or another ps set's (a scale, num_ps).
  const std::unique_ptr<SwitchablePsClient> ps_;
  ChiefState s_;
  std::unique_ptr<PsMonitor> monitor_;
  std::unique_ptr<Recovery> recovery_;
  std::unique_ptr<CheckpointDriver> checkpoints_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<PsScaling> scaling_;
  std::unique_ptr<TableMoves> moves_;
  // Interfaces to workers that joined (JoinJob), kept for the chief's life: a slot's
  // callbacks may still run on one after it was replaced.
  std::vector<std::unique_ptr<WorkerInterface>> joined_ ABSL_GUARDED_BY(s_.mu);
  // JoinJob and LeaveJob calls accepted since the chief started (JobStatus' counts).
  int64_t worker_joins_ ABSL_GUARDED_BY(s_.mu) = 0;
  int64_t worker_leaves_ ABSL_GUARDED_BY(s_.mu) = 0;
  // The current (or last) job's threads: Dispatcher::Run and Control. Started by
  // InstallLocked, joined before the next job is installed and by the destructor.
  std::thread dispatch_thread_;
  std::thread control_thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Chief>> Chief::Create(Options options) {
  if (options.ps == nullptr) return absl::InvalidArgumentError("Chief needs a PsClient");
  if (options.workers.empty() && !options.connect_worker) {
    // (With connect_worker every worker may join: TF_CONFIG's sparse worker job.)
    return absl::InvalidArgumentError("the cluster has no worker tasks");
  }
  if (static_cast<int>(options.ps_addresses.size()) != options.ps->num_ps()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Chief: ", options.ps_addresses.size(), " ps addresses for a client of ",
        options.ps->num_ps(), " ps"));
  }
  return std::unique_ptr<Chief>(new ChiefImpl(std::move(options)));
}

}  // namespace shardps
