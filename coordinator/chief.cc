#include "coordinator/chief.h"

#include <algorithm>
#include <deque>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "coordinator/checkpointing.h"
#include "coordinator/job_spec.h"
#include "coordinator/job_store.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/scheduler.h"
#include "coordinator/step_failure.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "model/model.h"
#include "data/dataset.h"

namespace shardps {
namespace {

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// How the job's state was found when it started.
struct StartOutcome {
  int64_t generation = 0;
  int64_t base_steps = 0;              // steps [0, base_steps) done at the start of generation
  std::vector<int64_t> journal_steps;  // and these, done since (a live resume)
  int64_t total_steps = 0;
  std::string resumed_from;            // "" for a fresh start
  bool already_finished = false;
  std::vector<uint64_t> incarnations;  // of every ps, as the job starts
};

// The outcome of rolling every ps back.
struct RollbackOutcome {
  int64_t checkpoint_id = 0;  // 0: re-initialized (no usable checkpoint)
  int64_t steps_done = 0;
  std::vector<std::string> skipped;  // checkpoints that could not be used, and why
};

class ChiefImpl : public Chief {
 public:
  explicit ChiefImpl(Options options) : options_(std::move(options)) {
    for (size_t i = 0; i < options_.workers.size(); ++i) {
      WorkerInfo info;
      info.set_index(i);
      info.set_address(options_.workers[i]->address());
      info.set_state("starting");
      workers_.push_back(WorkerState{info});
    }
    PsMonitor::Options monitor;
    monitor.interval = options_.probe_interval_ps;
    monitor.unreachable_after = options_.ps_unreachable_after;
    monitor.probe_timeout = std::max(absl::Seconds(1), options_.probe_interval_ps * 2);
    monitor_ = std::make_unique<PsMonitor>(options_.ps, monitor, [this] {
      absl::MutexLock lock(&mu_);
      control_wake_ = true;
      wake_ = true;
    });
  }

  ~ChiefImpl() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (dispatcher_.joinable()) dispatcher_.join();
    if (control_.joinable()) control_.join();
    monitor_.reset();
    // RPCs in flight reference this object: wait for them.
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return inflight_ == 0; };
    mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(30));
  }

  absl::StatusOr<SubmitJobResponse> Submit(const std::string& job_json,
                                           SubmitJobRequest::Resume resume) override {
    ASSIGN_OR_RETURN(JobSpec job, ParseJobSpec(job_json, num_workers()));
    if (job.checkpoint().dir().empty() && !options_.default_checkpoint_dir.empty()) {
      // The job file may give a schedule; the chief's --checkpoint_dir gives the place.
      job.mutable_checkpoint()->set_dir(options_.default_checkpoint_dir);
      if (job.checkpoint().every_steps() == 0 && job.checkpoint().every_seconds() == 0) {
        job.mutable_checkpoint()->set_every_seconds(
            absl::ToDoubleSeconds(options_.default_checkpoint_every));
      }
      if (job.checkpoint().keep() == 0) job.mutable_checkpoint()->set_keep(3);
    }
    {
      absl::MutexLock lock(&mu_);
      if (status_.state() == JobStatus::RUNNING || starting_) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job \"", status_.job_id(), "\" is still running; cancel it or wait"));
      }
      starting_ = true;
    }
    absl::StatusOr<SubmitJobResponse> response = Start(std::move(job), resume);
    absl::MutexLock lock(&mu_);
    starting_ = false;
    return response;
  }

  JobStatus Status() override {
    std::vector<PsMonitor::PsView> views = monitor_->Views();
    absl::MutexLock lock(&mu_);
    return StatusLocked(views);
  }

  absl::StatusOr<int64_t> AddSteps(const std::string& job_id, int64_t steps) override {
    if (steps <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("steps must be > 0, got ", steps));
    }
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckJob(job_id));
    if (status_.state() != JobStatus::RUNNING || scheduler_->Finished()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job \"", status_.job_id(), "\" is not running; steps cannot be added"));
    }
    int64_t total = scheduler_->AddSteps(steps);
    if (store_ != nullptr) {
      store_state_.total_steps = total;
      WriteStateLocked();
    }
    wake_ = true;
    return total;
  }

  absl::Status Cancel(const std::string& job_id) override {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckJob(job_id));
    if (status_.state() != JobStatus::RUNNING) {
      return absl::FailedPreconditionError(
          absl::StrCat("job \"", status_.job_id(), "\" is not running"));
    }
    scheduler_->Cancel();
    status_.set_state(JobStatus::CANCELLED);
    status_.set_error("cancelled by request");
    wake_ = true;
    control_wake_ = true;
    return absl::OkStatus();
  }

  absl::Status ReportEval(const ReportEvalRequest& request) override {
    absl::MutexLock lock(&mu_);
    if (request.job_id() != status_.job_id()) {
      return absl::NotFoundError(
          absl::StrCat("job \"", request.job_id(), "\" is not the current job"));
    }
    if (!status_.has_eval() || request.result().step() >= status_.last_eval().step() ||
        request.final()) {
      *status_.mutable_last_eval() = request.result();
      status_.set_has_eval(true);
    }
    // keep_best: an evaluation of a checkpoint (the sidecar evaluator's) rates it.
    const EvalMetrics& r = request.result();
    if (store_ != nullptr && r.checkpoint_id() > 0 &&
        (store_state_.best_checkpoint == 0 || r.accuracy() > store_state_.best_accuracy)) {
      store_state_.best_checkpoint = r.checkpoint_id();
      store_state_.best_accuracy = r.accuracy();
      WriteStateLocked();
    }
    if (request.final()) final_eval_ = true;
    wake_ = true;
    return absl::OkStatus();
  }

  void Checkpoint(const std::string& job_id,
                  std::function<void(absl::StatusOr<CheckpointInfo>)> done) override {
    absl::Status refused;
    {
      absl::MutexLock lock(&mu_);
      refused = CheckJob(job_id);
      if (refused.ok() && status_.state() != JobStatus::RUNNING) {
        refused = absl::FailedPreconditionError(
            absl::StrCat("job \"", status_.job_id(), "\" is not running"));
      }
      if (refused.ok() && store_ == nullptr) {
        refused = absl::FailedPreconditionError(absl::StrCat(
            "job \"", status_.job_id(), "\" has no checkpoint directory (job file field "
            "\"checkpoint.dir\", or the chief's --checkpoint_dir)",
            status_.checkpoint_error().empty() ? "" : ": ", status_.checkpoint_error()));
      }
      if (refused.ok()) {
        checkpoint_waiters_.push_back(std::move(done));
        control_wake_ = true;
        return;
      }
    }
    done(refused);
  }

  bool Interrupt(absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    if (status_.state() != JobStatus::RUNNING) return false;
    if (store_ != nullptr) {
      interrupt_checkpoint_ = true;
      interrupt_done_ = false;
      control_wake_ = true;
      auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return interrupt_done_ || status_.state() != JobStatus::RUNNING;
      };
      if (!mu_.AwaitWithTimeout(absl::Condition(&done), timeout)) {
        std::cerr << "chief: no checkpoint within " << timeout
                  << " of the interrupt; the restarted chief resumes from the last one\n";
      }
    }
    // Stop dispatching; calls in flight finish on the workers. The job stays RUNNING in the
    // checkpoint directory's eyes: a restarted chief resumes it.
    interrupted_ = true;
    wake_ = true;
    return true;
  }

  bool WaitForJobEnd(absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return job_ended_; };
    return mu_.AwaitWithTimeout(absl::Condition(&ended), timeout);
  }

  void ShutdownCluster(const std::string& reason) override {
    std::vector<WorkerShutdownRequest> requests(workers_.size());
    std::vector<WorkerShutdownResponse> responses(workers_.size());
    std::vector<absl::Notification> done(workers_.size());
    for (size_t i = 0; i < workers_.size(); ++i) {
      requests[i].set_reason(reason);
      options_.workers[i]->ShutdownAsync(&requests[i], &responses[i],
                                         absl::Now() + absl::Seconds(5),
                                         [&done, i](const absl::Status&) { done[i].Notify(); });
    }
    for (auto& d : done) d.WaitForNotification();
    (void)options_.ps->ShutdownAll(reason);
  }

 private:
  struct WorkerState {
    WorkerInfo info;
    std::string started_job;  // job the worker has accepted
    // Calls to the worker not yet returned: its StartJob (only ever alone), or up to
    // StepsInFlight(job_) RunSteps, each holding its own lease.
    int in_flight = 0;
    absl::Time next_probe = absl::InfinitePast();
    absl::Time last_contact = absl::InfinitePast();
    // StartJobs it refused in a row (it is up but cannot run the job): see StartJobOn.
    int refusals = 0;
  };

  // "busy" while a step is in flight, else "idle"; a worker that is failed or starting keeps
  // that state until its StartJob succeeds.
  static void SetRunningState(WorkerState& w) {
    w.info.set_state(w.in_flight > 0 ? "busy" : "idle");
  }

  int num_workers() const { return static_cast<int>(options_.workers.size()); }
  int num_ps() const { return options_.ps->num_ps(); }

  absl::Status CheckJob(const std::string& job_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (status_.state() == JobStatus::NO_JOB) {
      return absl::FailedPreconditionError("no job has been submitted");
    }
    if (!job_id.empty() && job_id != status_.job_id()) {
      return absl::NotFoundError(absl::StrCat("job \"", job_id, "\" is not the current job \"",
                                              status_.job_id(), "\""));
    }
    return absl::OkStatus();
  }

  // ---------------------------------------------------------------------------------------
  // Starting a job: what is found in its checkpoint directory and on the ps decides whether it
  // starts fresh, resumes from the ps's live state or rolls back to a checkpoint.

  absl::StatusOr<SubmitJobResponse> Start(JobSpec job, SubmitJobRequest::Resume resume) {
    // The chief reads the training set's description (its files' headers, not its
    // examples): to size epochs, and to reject a job whose data is missing before any worker
    // starts.
    absl::StatusOr<DatasetInfo> train = DescribeDataset(job.dataset(), job.data_dir(), Split::kTrain);
    if (!train.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job: \"data_dir\": cannot load ", job.dataset(), " from \"", job.data_dir(),
          "\": ", train.status().message()));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(job, *train));
    Scheduler::Plan plan;
    plan.steps_per_epoch = StepsPerEpoch(train->num_examples, job.batch_size());
    plan.total_steps = job.steps() > 0 ? job.steps() : plan.steps_per_epoch * job.epochs();
    switch (job.mode()) {
      case JobSpec::ASYNC:
        plan.mode = Scheduler::Mode::kAsync;
        break;
      case JobSpec::SYNC:
        plan.mode = Scheduler::Mode::kSync;
        plan.num_replicas = job.num_replicas();
        plan.replicas_to_aggregate = ReplicasToAggregate(job);
        break;
      case JobSpec::STALE:
        plan.mode = Scheduler::Mode::kStale;
        plan.staleness = job.staleness();
        break;
      default:
        return absl::InvalidArgumentError("job: \"mode\": unsupported");
    }
    ASSIGN_OR_RETURN(Scheduler scheduler, Scheduler::Create(plan));
    const std::vector<VariableDef> defs = JobVariables(job, *model);

    // The checkpoint directory. One that cannot be used is reported, and the job trains on
    // without durable state (as the issue asks of an unwritable directory).
    std::unique_ptr<JobStore> store;
    std::string checkpoint_error;
    if (job.has_checkpoint() && job.checkpoint().dir().empty()) {
      checkpoint_error =
          "the job file schedules checkpoints but names no \"checkpoint.dir\", and the chief "
          "has no --checkpoint_dir: the job has no durable state";
      std::cerr << "chief: " << checkpoint_error << "\n";
    }
    if (!job.checkpoint().dir().empty()) {
      absl::StatusOr<std::unique_ptr<JobStore>> opened = JobStore::Open(job.checkpoint().dir());
      if (opened.ok()) {
        store = *std::move(opened);
      } else {
        checkpoint_error = std::string(opened.status().message());
        std::cerr << "chief: checkpoints disabled: " << checkpoint_error << "\n";
      }
    }
    if (store == nullptr && resume == SubmitJobRequest::RESUME) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job \"", job.name(), "\": nothing to resume: ",
          job.checkpoint().dir().empty() ? "the job has no checkpoint directory"
                                         : checkpoint_error));
    }
    if (store != nullptr && resume == SubmitJobRequest::FRESH) {
      std::cerr << "chief: --fresh: removing the checkpoints and journal in "
                << store->dir().path() << "\n";
      RETURN_IF_ERROR(store->dir().Clear());
    }
    std::optional<JobStore::Identity> identity;
    JobStore::State state;
    if (store != nullptr) {
      ASSIGN_OR_RETURN(identity, store->ReadIdentity());
      ASSIGN_OR_RETURN(state, store->ReadState());
    }
    if (identity.has_value()) {
      RETURN_IF_ERROR(CheckSameJob(identity->job, job));
      job.set_job_id(identity->job_id);
    } else {
      if (resume == SubmitJobRequest::RESUME) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job \"", job.name(), "\": nothing to resume in ", store->dir().path()));
      }
      absl::BitGen gen;
      job.set_job_id(absl::StrCat(job.name(), "-", absl::Hex(absl::Uniform<uint32_t>(gen),
                                                             absl::kZeroPad8)));
      state = JobStore::State();
    }

    SubmitJobResponse response;
    response.set_job_id(job.job_id());
    if (state.finished) {
      response.set_already_finished(true);
      response.set_total_steps(state.total_steps);
      response.set_resumed_at_step(state.total_steps);
      response.set_resumed_from(
          absl::StrCat("finished before (checkpoint ", state.final_checkpoint, ")"));
      absl::MutexLock lock(&mu_);
      EndFinishedJobLocked(job, plan, state, response.resumed_from());
      std::cerr << "chief: job " << job.job_id() << " had already finished ("
                << state.total_steps << " steps); nothing to train\n";
      return response;
    }

    ASSIGN_OR_RETURN(StartOutcome outcome,
                     PrepareState(job, defs, store.get(), identity.has_value(), state, resume,
                                  scheduler.total_steps()));
    RETURN_IF_ERROR(scheduler.Restore(outcome.base_steps, outcome.journal_steps,
                                      outcome.total_steps));
    RefreshPsViews();
    if (store != nullptr) {
      if (!identity.has_value()) {
        JobStore::Identity fresh{job.job_id(), job};
        RETURN_IF_ERROR(store->WriteIdentity(fresh));
      }
      state.generation = outcome.generation;
      state.generation_start_steps = outcome.base_steps;
      state.total_steps = outcome.total_steps;
      RETURN_IF_ERROR(store->WriteState(state));
      RETURN_IF_ERROR(store->StartJournal(outcome.generation));
    }
    response.set_total_steps(scheduler.total_steps());
    response.set_resumed_at_step(scheduler.done_steps());
    response.set_resumed_from(outcome.resumed_from);
    if (!outcome.resumed_from.empty()) {
      std::cerr << "chief: job " << job.job_id() << " resumed from " << outcome.resumed_from
                << " at step " << scheduler.done_steps() << " of " << scheduler.total_steps()
                << " (generation " << outcome.generation << ")\n";
    }

    absl::MutexLock lock(&mu_);
    JoinThreadsLocked();
    job_ = job;
    defs_ = defs;
    scheduler_ = std::make_unique<Scheduler>(std::move(scheduler));
    store_ = std::move(store);
    store_state_ = state;
    generation_ = outcome.generation;
    incremental_base_ = 0;
    increments_ = 0;
    expected_incarnation_ = outcome.incarnations;
    incarnations_checked_at_ = absl::InfinitePast();
    final_retry_at_ = absl::InfinitePast();
    status_ = JobStatus();
    status_.set_state(JobStatus::RUNNING);
    status_.set_job_id(job.job_id());
    status_.set_name(job.name());
    status_.set_steps_per_epoch(plan.steps_per_epoch);
    status_.set_mode(JobSpec::Mode_Name(job.mode()));
    status_.set_checkpoint_error(checkpoint_error);
    status_.set_resumed_from(outcome.resumed_from);
    *status_.mutable_job() = job;
    start_ = absl::Now();
    recent_.clear();
    progress_.clear();
    step_attempts_.clear();
    final_eval_ = false;
    job_ended_ = false;
    for (WorkerState& w : workers_) w.refusals = 0;
    paused_ = false;
    ps_paused_ = false;
    phase_.clear();
    recovery_cause_.clear();
    final_checkpoint_done_ = false;
    interrupted_ = false;
    interrupt_checkpoint_ = false;
    last_checkpoint_steps_ = scheduler_->done_steps();
    last_checkpoint_time_ = absl::Now();
    training_end_ = absl::InfiniteFuture();
    for (WorkerState& w : workers_) {
      w.started_job.clear();
      w.info.set_state("starting");
      w.next_probe = absl::InfinitePast();
    }
    dispatcher_ = std::thread([this] { Dispatch(); });
    control_ = std::thread([this] { Control(); });
    return response;
  }

  // A job whose checkpoint directory says it finished: reported as SUCCEEDED, not trained.
  void EndFinishedJobLocked(const JobSpec& job, const Scheduler::Plan& plan,
                            const JobStore::State& state, const std::string& resumed_from)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JoinThreadsLocked();
    job_ = job;
    scheduler_.reset();
    store_.reset();
    status_ = JobStatus();
    status_.set_state(JobStatus::SUCCEEDED);
    status_.set_job_id(job.job_id());
    status_.set_name(job.name());
    status_.set_steps_per_epoch(plan.steps_per_epoch);
    status_.set_mode(JobSpec::Mode_Name(job.mode()));
    status_.set_steps_done(state.total_steps);
    status_.set_total_steps(state.total_steps);
    status_.set_training_done(true);
    status_.set_resumed_from(resumed_from);
    *status_.mutable_job() = job;
    start_ = end_ = absl::Now();
    training_end_ = end_;
    job_ended_ = true;
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

  // Sync mode's k: the gradients of a sync step that the ps apply it with (k = n - b with b
  // backup workers); 0 without backups, so that the shards' specs are those of a job from
  // before backup workers existed (a live resume compares them).
  static int ReplicasToAggregate(const JobSpec& job) {
    if (job.mode() != JobSpec::SYNC || job.sync_backup_workers() <= 0) return 0;
    return job.num_replicas() - job.sync_backup_workers();
  }

  // The variables of the job's model, as the chief creates them on the ps.
  static std::vector<VariableDef> JobVariables(const JobSpec& job, const Model& model) {
    std::vector<VariableDef> defs;
    for (const VariableInfo& var : model.variables()) {
      VariableDef def;
      def.name = absl::StrCat(job.name(), "/", var.name);
      def.shape = var.shape;
      def.initializer = var.initializer;
      def.optimizer = var.access == VariableAccess::kRows && job.has_embedding_optimizer()
                          ? job.embedding_optimizer()
                          : job.optimizer();
      if (var.dynamic) {
        const DynamicTablesSpec& tables = job.dynamic_tables();
        def.dynamic = DynamicTableDef{};
        if (tables.num_buckets() > 0) def.dynamic->num_buckets = tables.num_buckets();
        def.dynamic->admit_after = tables.admit_after();
        def.dynamic->ttl_steps = tables.ttl_steps();
        def.dynamic->max_rows = tables.max_rows();
      }
      if (job.mode() == JobSpec::SYNC) {
        def.update.set_mode(UpdateSpec::SYNC);
        def.update.set_num_replicas(job.num_replicas());
        def.update.set_replicas_to_aggregate(ReplicasToAggregate(job));
      } else if (!var.dynamic) {
        // The ps' staleness-aware updates (ps_server/staleness.h); retained_versions stays
        // the ps' default, so the shards' specs do not depend on the cluster's size. (A
        // dynamic table has none: its rows are applied as pushed.)
        def.update.set_staleness_lr(job.staleness_lr());
        def.update.set_delay_compensation(job.delay_compensation());
        def.update.set_delay_compensation_adaptive(job.delay_compensation_adaptive());
      }
      defs.push_back(def);
    }
    return defs;
  }

  // Creates the job's variables on every ps (idempotent where they exist with the same
  // layout). Shards of this job in another layout (another partitioner or number of ps:
  // a re-sharded restore follows) are dropped first.
  absl::Status CreateVariables(const JobSpec& job, const std::vector<VariableDef>& defs) {
    ASSIGN_OR_RETURN(auto partitioner, ParsePartitioner(job.partitioner()));
    ASSIGN_OR_RETURN(auto placer, ParsePlacement(job.placement(), num_ps()));
    absl::Status s = options_.ps->CreateVariables(defs, *partitioner, placer.get());
    if (s.code() != absl::StatusCode::kAlreadyExists) return s;
    std::cerr << "chief: the ps hold job " << job.name()
              << "'s variables in another layout; dropping them (" << s.message() << ")\n";
    DropShardsRequest drop;
    for (const VariableDef& def : defs) drop.add_variables(def.name);
    RETURN_IF_ERROR(options_.ps->DropShardsAll(drop));
    ASSIGN_OR_RETURN(placer, ParsePlacement(job.placement(), num_ps()));
    return options_.ps->CreateVariables(defs, *partitioner, placer.get());
  }

  // Every ps answering, with its health. UNAVAILABLE naming the first that does not, after
  // retrying for ps_unreachable_after: a ps that has just come up (the chief waited for it)
  // may still be refused for a moment by a connection of ours that is backing off from
  // before it was up, and a probe is not retried.
  absl::StatusOr<std::vector<HealthResponse>> HealthOfAll() {
    const absl::Time deadline = absl::Now() + options_.ps_unreachable_after;
    while (true) {
      std::vector<absl::Status> statuses;
      std::vector<HealthResponse> responses;
      options_.ps->HealthEach(/*from_chief=*/true, absl::Seconds(5), &statuses, &responses);
      absl::Status failed;
      for (const absl::Status& s : statuses) {
        if (!s.ok()) {
          failed = s;
          break;
        }
      }
      if (failed.ok()) return responses;
      if (failed.code() != absl::StatusCode::kUnavailable || absl::Now() >= deadline) {
        return failed;
      }
      absl::SleepFor(absl::Milliseconds(100));
    }
  }

  // Decides how the job starts and puts the ps in that state: resumes from the ps's live
  // state (every ps still at the generation the directory records, holding the job's
  // shards), rolls back to the newest usable checkpoint, or starts fresh (warm-started when
  // the job says so).
  absl::StatusOr<StartOutcome> PrepareState(const JobSpec& job,
                                            const std::vector<VariableDef>& defs,
                                            JobStore* store, bool known_job,
                                            const JobStore::State& state,
                                            SubmitJobRequest::Resume resume,
                                            int64_t planned_total) {
    StartOutcome out;
    out.total_steps = state.total_steps > 0 ? state.total_steps : planned_total;
    ASSIGN_OR_RETURN(std::vector<HealthResponse> before, HealthOfAll());
    bool ps_hold_shards = false;
    bool all_at_generation = state.generation > 0;
    int64_t max_generation = state.generation;
    for (const HealthResponse& h : before) {
      ps_hold_shards |= h.num_shards() > 0;
      all_at_generation &= h.generation() == state.generation;
      max_generation = std::max(max_generation, h.generation());
    }
    if (!ps_hold_shards) RETURN_IF_ERROR(CheckModelFits(defs, before));
    RETURN_IF_ERROR(CreateVariables(job, defs));
    ASSIGN_OR_RETURN(std::vector<HealthResponse> after, HealthOfAll());
    for (const HealthResponse& h : after) out.incarnations.push_back(h.incarnation());
    // A ps that restarted between the two probes lost what it had: treat it as such.
    for (size_t k = 0; k < before.size() && k < after.size(); ++k) {
      all_at_generation &= before[k].incarnation() == after[k].incarnation() &&
                           after[k].generation() == state.generation;
    }
    const bool may_resume = store != nullptr && known_job && resume != SubmitJobRequest::FRESH;

    if (may_resume && all_at_generation) {
      // Every ps kept its state since this generation began: resume without a rollback. The
      // journal names the steps done since; steps whose completion it missed run again
      // with the same request ids, which the ps answer as duplicates.
      out.generation = state.generation;
      out.base_steps = state.generation_start_steps;
      ASSIGN_OR_RETURN(out.journal_steps, store->JournalSteps(state.generation));
      out.resumed_from = absl::StrCat("the ps tasks' live state (generation ", out.generation,
                                      ", ", out.journal_steps.size(),
                                      " steps journalled since step ", out.base_steps, ")");
      return out;
    }
    out.generation = max_generation + 1;
    if (store != nullptr) {
      // Recorded before the ps move to it: a chief that dies now finds a generation no ps
      // is at, and rolls back again.
      JobStore::State moving = state;
      moving.generation = out.generation;
      RETURN_IF_ERROR(store->WriteState(moving));
    }
    if (may_resume) {
      ASSIGN_OR_RETURN(RollbackOutcome rolled, RollBack(job, defs, store, out.generation));
      if (rolled.checkpoint_id > 0) {
        out.base_steps = rolled.steps_done;
        out.resumed_from = absl::StrCat("checkpoint ", rolled.checkpoint_id, " (step ",
                                        rolled.steps_done, ")");
        if (!rolled.skipped.empty()) {
          absl::StrAppend(&out.resumed_from, "; skipped ", absl::StrJoin(rolled.skipped, "; "));
        }
        return out;
      }
      if (resume == SubmitJobRequest::RESUME) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job \"", job.job_id(), "\": nothing to resume: no usable checkpoint in ",
            store->dir().path(),
            rolled.skipped.empty() ? "" : absl::StrCat(" (", absl::StrJoin(rolled.skipped, "; "),
                                                       ")")));
      }
      if (!rolled.skipped.empty()) {
        out.resumed_from =
            absl::StrCat("step 0: no usable checkpoint (", absl::StrJoin(rolled.skipped, "; "),
                         ")");
      }
      return out;  // RollBack re-initialized the shards
    }
    // A fresh start. Shards the ps already held (a chief restarted without a checkpoint
    // directory, --fresh) start over from their initializers.
    if (ps_hold_shards) {
      RestoreRequest reinit;
      reinit.set_generation(out.generation);
      for (const VariableDef& def : defs) (*reinit.mutable_variable_map())[def.name] = def.name;
      std::vector<RestoreResponse> responses;
      RETURN_IF_ERROR(options_.ps->RestoreAll(reinit, &responses));
    } else {
      RETURN_IF_ERROR(options_.ps->SetGenerationAll(out.generation));
    }
    if (!job.warm_start().from().empty()) RETURN_IF_ERROR(WarmStart(job, defs, out.generation));
    return out;
  }

  // The model must fit in what the ps tasks can still allocate (checked before anything is
  // allocated, so a model too large fails at submit with its size named).
  absl::Status CheckModelFits(const std::vector<VariableDef>& defs,
                              const std::vector<HealthResponse>& health) {
    int64_t need = 0;
    for (const VariableDef& def : defs) {
      int64_t elements = 1;
      for (int64_t d : def.shape) elements *= d;
      // A dynamic table grows as rows are pushed: count its budget when it has one.
      if (def.dynamic.has_value()) elements = def.dynamic->max_rows * def.shape.back();
      int slots = 0;
      switch (def.optimizer.type()) {
        case OptimizerSpec::MOMENTUM:
        case OptimizerSpec::ADAGRAD:
          slots = 1;
          break;
        case OptimizerSpec::ADAM:
        case OptimizerSpec::FTRL:
          slots = 2;
          break;
        default:
          break;
      }
      need += elements * static_cast<int64_t>(sizeof(float)) * (1 + slots);
    }
    int64_t available = 0;
    for (const HealthResponse& h : health) {
      if (h.memory_budget_bytes() <= 0) return absl::OkStatus();  // a ps without a budget
      available += h.memory_available_bytes();
    }
    if (need > available) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job: \"model\": the model needs ", need, " bytes of parameters and optimizer slots; "
          "the ", health.size(), " ps tasks can hold ", available,
          " more (their --memory_budget_bytes less the snapshot reserve)"));
    }
    return absl::OkStatus();
  }

  absl::Status WarmStart(const JobSpec& job, const std::vector<VariableDef>& defs,
                         int64_t generation) {
    RestoreRequest request;
    request.set_generation(generation);
    request.set_params_only(!job.warm_start().with_slots());
    ASSIGN_OR_RETURN(CommittedCheckpoint source, FindCheckpoint(job.warm_start().from()));
    request.set_manifest(source.manifest_path);
    if (job.warm_start().variables().empty()) {
      for (const VariableDef& def : defs) {
        if (source.manifest.FindVariable(def.name) != nullptr) {
          (*request.mutable_variable_map())[def.name] = def.name;
        }
      }
    } else {
      for (const auto& [mine, theirs] : job.warm_start().variables()) {
        (*request.mutable_variable_map())[mine] = theirs;
      }
    }
    if (request.variable_map().empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "job: \"warm_start.from\": checkpoint ", source.path,
          " holds none of this job's variables; name them in \"warm_start.variables\""));
    }
    std::vector<RestoreResponse> responses;
    absl::Status s = options_.ps->RestoreAll(request, &responses);
    if (!s.ok()) return Annotate(s, absl::StrCat("warm start from ", source.path));
    std::cerr << "chief: warm-started " << request.variable_map().size()
              << " variables from " << source.path << "\n";
    return absl::OkStatus();
  }

  // `path`: a checkpoint directory (its newest committed checkpoint) or one checkpoint.
  static absl::StatusOr<CommittedCheckpoint> FindCheckpoint(const std::string& path) {
    absl::StatusOr<std::string> own = ReadWholeFile(path + "/manifest.json");
    if (own.ok()) {
      CommittedCheckpoint c;
      c.path = path;
      c.manifest_path = path + "/manifest.json";
      ASSIGN_OR_RETURN(c.manifest, ParseManifest(*own, c.manifest_path));
      c.id = c.manifest.checkpoint_id;
      return c;
    }
    ASSIGN_OR_RETURN(CheckpointDir dir, CheckpointDir::Open(path, /*create=*/false));
    ASSIGN_OR_RETURN(std::vector<CommittedCheckpoint> all, dir.List());
    if (all.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("\"", path, "\" holds no committed checkpoint"));
    }
    return all.front();
  }

  // Rolls every ps back to the newest checkpoint of `store` that restores (a corrupt or
  // unusable one is skipped, named), or re-initializes the job's shards when there is none;
  // the ps move to `generation` first. Creates the job's shards where they are missing (a
  // restarted ps). Errors are the ps's (say, one down again): the caller retries.
  absl::StatusOr<RollbackOutcome> RollBack(const JobSpec& job,
                                           const std::vector<VariableDef>& defs,
                                           JobStore* store, int64_t generation) {
    RETURN_IF_ERROR(CreateVariables(job, defs));
    RollbackOutcome out;
    RestoreRequest request;
    request.set_generation(generation);
    // Only this job's variables: a long-lived ps may hold other jobs' too.
    for (const VariableDef& def : defs) (*request.mutable_variable_map())[def.name] = def.name;
    std::vector<RestoreResponse> responses;
    if (store != nullptr) {
      std::vector<std::string> unreadable;
      ASSIGN_OR_RETURN(std::vector<CommittedCheckpoint> checkpoints,
                       store->dir().List(&unreadable));
      for (const std::string& u : unreadable) out.skipped.push_back(u);
      for (const CommittedCheckpoint& c : checkpoints) {
        if (c.manifest.job_id != job.job_id()) {
          out.skipped.push_back(absl::StrCat("checkpoint ", c.id, " belongs to job ",
                                             c.manifest.job_id));
          continue;
        }
        request.set_manifest(c.manifest_path);
        absl::Status s = options_.ps->RestoreAll(request, &responses);
        if (s.ok()) {
          out.checkpoint_id = c.id;
          out.steps_done = c.manifest.progress.steps_done;
          return out;
        }
        const absl::StatusCode code = s.code();
        if (code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kFailedPrecondition ||
            code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound) {
          std::cerr << "chief: checkpoint " << c.id << " cannot be restored: " << s << "\n";
          out.skipped.push_back(absl::StrCat("checkpoint ", c.id, ": ", s.message()));
          continue;
        }
        return s;
      }
    }
    request.clear_manifest();
    RETURN_IF_ERROR(options_.ps->RestoreAll(request, &responses));
    return out;
  }

  // ---------------------------------------------------------------------------------------
  // The control thread: checkpoints and recoveries, one at a time, for the current job.

  void Control() {
    absl::MutexLock lock(&mu_);
    absl::Time retry_recovery = absl::InfinitePast();
    while (!stopping_ && !job_ended_) {
      if (status_.state() == JobStatus::RUNNING && !interrupted_) {
        UpdatePsPhaseLocked();
        if (!recovery_cause_.empty() && absl::Now() >= retry_recovery) {
          if (!RecoverLocked()) retry_recovery = absl::Now() + absl::Seconds(1);
          continue;
        }
        if (recovery_cause_.empty() && !ps_paused_) {
          const char* why = CheckpointDueLocked();
          if (why != nullptr) {
            RunCheckpointLocked(why);
            continue;
          }
        }
      }
      if (status_.state() != JobStatus::RUNNING || interrupted_) FailWaitersLocked();
      control_wake_ = false;
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return control_wake_ || stopping_ || job_ended_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(200));
    }
    FailWaitersLocked();
  }

  void FailWaitersLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (checkpoint_waiters_.empty()) return;
    auto waiters = std::move(checkpoint_waiters_);
    checkpoint_waiters_.clear();
    const absl::Status s = absl::FailedPreconditionError(
        absl::StrCat("job \"", status_.job_id(), "\" is not running"));
    mu_.Unlock();
    for (auto& w : waiters) w(s);
    mu_.Lock();
  }

  // Whether ps k (as the monitor last saw it up) is another incarnation than the job's. A view
  // from a probe sent before the chief last asked the ps itself (a recovery's Health) may be
  // of the incarnation that recovery replaced: the next probe tells.
  bool RestartedLocked(size_t k, const PsMonitor::PsView& v) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return k < expected_incarnation_.size() && v.incarnation != expected_incarnation_[k] &&
           v.last_up_sent >= incarnations_checked_at_;
  }

  // A ps (ps_task; -1: not known which) lost the job's shards: the control thread rolls the
  // job back.
  void PsStateLostLocked(int ps_task, absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (recovery_cause_.empty()) {
      recovery_cause_ =
          absl::StrCat(ps_task >= 0 ? absl::StrCat("ps ", ps_task) : std::string("a ps"),
                       " lost the job's shards (", why, ")");
      std::cerr << "chief: " << recovery_cause_ << "\n";
    }
    control_wake_ = true;
    monitor_->ProbeNow();
  }

  // Pauses leasing while a ps is unreachable (its steps would only fail), says why in the
  // status, and asks for a recovery when a ps came back as a new incarnation.
  void UpdatePsPhaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::vector<PsMonitor::PsView> views = monitor_->Views();
    std::string unreachable;
    for (size_t k = 0; k < views.size(); ++k) {
      const PsMonitor::PsView& v = views[k];
      // A ps the monitor has never seen up may just not have been probed yet, unless the
      // job reached it at its start (its incarnation is known): then it went down since,
      // and the job pauses for it as for any other (a ps killed before the monitor's first
      // answer left the job requeueing its steps with no reason given).
      const bool job_reached_it =
          k < expected_incarnation_.size() && expected_incarnation_[k] != 0;
      if (!v.probed && !job_reached_it) continue;
      if (!v.up) {
        if (unreachable.empty()) {
          const double down_s =
              v.failing_since == absl::InfiniteFuture()
                  ? 0
                  : absl::ToDoubleSeconds(absl::Now() - v.failing_since);
          unreachable = absl::StrCat("ps ", k, " (", options_.ps_addresses[k],
                                     ") unreachable for ", static_cast<int64_t>(down_s),
                                     " s: ", v.error);
        }
        continue;
      }
      if (RestartedLocked(k, v) && recovery_cause_.empty()) {
        recovery_cause_ = absl::StrCat("ps ", k, " (", options_.ps_addresses[k],
                                       ") restarted (incarnation ",
                                       absl::Hex(v.incarnation), ") and lost its shards");
        std::cerr << "chief: " << recovery_cause_ << "\n";
      }
    }
    const bool was = ps_paused_;
    ps_paused_ = !unreachable.empty();
    if (ps_paused_) {
      phase_ = absl::StrCat("paused: ", unreachable);
    } else if (was && recovery_cause_.empty()) {
      phase_.clear();
      std::cerr << "chief: every ps is reachable again; resuming\n";
    }
    if (was != ps_paused_) wake_ = true;
  }

  // Why a checkpoint is due now, or null.
  const char* CheckpointDueLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (store_ == nullptr) return nullptr;
    if (interrupt_checkpoint_) return "interrupted";
    if (!checkpoint_waiters_.empty()) return "on demand";
    if (scheduler_->Finished()) {
      return final_checkpoint_done_ || absl::Now() < final_retry_at_ ? nullptr : "final";
    }
    const CheckpointSpec& spec = job_.checkpoint();
    const int64_t done = scheduler_->done_steps();
    if (done == last_checkpoint_steps_) return nullptr;
    if (spec.every_steps() > 0 && done - last_checkpoint_steps_ >= spec.every_steps()) {
      return "every_steps";
    }
    if (spec.every_seconds() > 0 &&
        absl::Now() - last_checkpoint_time_ >= absl::Seconds(spec.every_seconds())) {
      return "every_seconds";
    }
    return nullptr;
  }

  void RunCheckpointLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const bool final = why == "final";
    auto waiters = std::move(checkpoint_waiters_);
    checkpoint_waiters_.clear();
    absl::StatusOr<CheckpointInfo> info = TakeCheckpointLocked(final);
    last_checkpoint_time_ = absl::Now();  // a failed one is not retried at once either
    if (info.ok()) {
      last_checkpoint_steps_ = info->steps_done();
      *status_.mutable_last_checkpoint() = *info;
      status_.set_has_checkpoint(true);
      status_.clear_checkpoint_error();
      std::cerr << "chief: checkpoint " << info->id() << " (" << why << ") committed at step "
                << info->steps_done() << ": " << info->bytes() << " bytes in "
                << info->write_seconds() << " s, training paused " << info->pause_ms()
                << " ms\n";
    } else {
      // Nor by steps: the next attempt is due every_steps after this one, not at the next
      // wake of this thread (a full disk would otherwise cut the job at a barrier for a
      // checkpoint after every step).
      last_checkpoint_steps_ = scheduler_->done_steps();
      status_.set_checkpoint_error(
          absl::StrCat("checkpoint (", why, ") failed: ", info.status().message()));
      std::cerr << "chief: " << status_.checkpoint_error() << "\n";
    }
    bool final_done = final;
    if (final && !info.ok()) {
      // A ps that lost its state (it restarted) or cannot be reached holds the trained model,
      // or held it: the job does not end on it. A restarted ps rolls the job back to the last
      // checkpoint (its steps run again, then the final checkpoint); an unreachable one
      // pauses the job until it answers, and the final checkpoint is taken again then.
      const StepFailure failure = ClassifyStepFailure(info.status());
      if (failure.kind == StepFailureKind::kPsStateLost ||
          failure.kind == StepFailureKind::kPsUnavailable) {
        if (failure.kind == StepFailureKind::kPsStateLost) {
          PsStateLostLocked(failure.ps_task, absl::StrCat("during the final checkpoint: ",
                                                          info.status().message()));
        } else {
          monitor_->ProbeNow();
        }
        final_retry_at_ = absl::Now() + absl::Seconds(1);
        final_done = false;
      }
    }
    if (final_done) {
      // Training is over either way (a full disk, say); without a final checkpoint a restart
      // retrains from the last one.
      final_checkpoint_done_ = true;
      if (info.ok()) {
        store_state_.finished = true;
        store_state_.final_checkpoint = info->id();
        WriteStateLocked();
      }
      wake_ = true;
    }
    if (why == "interrupted") {
      interrupt_checkpoint_ = false;
      interrupt_done_ = true;
    }
    if (!waiters.empty()) {
      mu_.Unlock();
      for (auto& w : waiters) w(info);
      mu_.Lock();
    }
  }

  // Cuts, snapshots and commits a checkpoint. Holds mu_ except while it waits on the ps and
  // the disk; leasing stops only from the barrier to the snapshot.
  absl::StatusOr<CheckpointInfo> TakeCheckpointLocked(bool final)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time t0 = absl::Now();
    const int64_t total = scheduler_->total_steps();
    const int64_t barrier =
        final ? total : std::min(total, scheduler_->RoundUp(scheduler_->NextNew()));
    scheduler_->SetBarrier(barrier);
    phase_ = absl::StrCat("checkpointing: finishing the steps below ", barrier);
    auto cut = [this, barrier]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return scheduler_->DonePrefix() >= barrier || stopping_ ||
             status_.state() != JobStatus::RUNNING || !recovery_cause_.empty() || ps_paused_;
    };
    while (!cut()) {
      mu_.AwaitWithTimeout(absl::Condition(&cut), absl::Milliseconds(200));
      UpdatePsPhaseLocked();
    }
    if (scheduler_->DonePrefix() < barrier) {
      scheduler_->ClearBarrier();
      if (phase_.rfind("checkpointing", 0) == 0) phase_.clear();
      wake_ = true;
      return absl::AbortedError(
          absl::StrCat("abandoned before the cut at step ", barrier, ": ",
                       !recovery_cause_.empty() ? recovery_cause_
                       : ps_paused_             ? phase_
                                                : std::string("the job stopped")));
    }
    const int64_t generation = generation_;
    const CheckpointDir dir = store_->dir();
    CheckpointContents contents;
    contents.job_id = job_.job_id();
    contents.job = job_;
    contents.generation = generation;
    contents.final = final;
    contents.steps_done = barrier;
    contents.total_steps = total;
    contents.steps_per_epoch = status_.steps_per_epoch();
    const int keep = std::max(1, job_.checkpoint().keep());
    std::optional<int64_t> best;
    if (job_.checkpoint().keep_best() && store_state_.best_checkpoint > 0) {
      best = store_state_.best_checkpoint;
    }
    const std::vector<VariableDef> defs = defs_;
    // Dynamic tables are written incrementally, on top of the previous committed checkpoint
    // of this generation, until full_every - 1 increments have been taken.
    const int full_every =
        job_.checkpoint().full_every() > 0 ? job_.checkpoint().full_every() : kDefaultFullEvery;
    bool dynamic = false;
    for (const VariableDef& def : defs) dynamic |= def.dynamic.has_value();
    const int64_t incremental_since =
        dynamic && incremental_base_ > 0 && increments_ + 1 < full_every ? incremental_base_ : 0;

    // The cut: every ps snapshots (references to its blocks), then leasing resumes.
    mu_.Unlock();
    absl::Status snapped;
    std::vector<SnapshotResponse> snapshots;
    absl::StatusOr<int64_t> id = dir.NextId();
    absl::StatusOr<std::string> path =
        id.ok() ? dir.Prepare(*id) : absl::StatusOr<std::string>(id.status());
    if (path.ok()) {
      std::vector<std::string> files;
      for (int k = 0; k < num_ps(); ++k) {
        files.push_back(absl::StrCat(*path, "/", CheckpointDir::DataFileName(k, num_ps())));
      }
      snapped = options_.ps->SnapshotAll(*id, files, generation, incremental_since, &snapshots);
    } else {
      snapped = path.status();
    }
    mu_.Lock();
    scheduler_->ClearBarrier();
    if (phase_.rfind("checkpointing", 0) == 0) phase_.clear();
    wake_ = true;
    const double pause_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
    RETURN_IF_ERROR(snapped);

    // The files: each ps writes its own; wait for all of them, then commit.
    mu_.Unlock();
    absl::StatusOr<CheckpointInfo> info = [&]() -> absl::StatusOr<CheckpointInfo> {
      std::vector<SnapshotStatusResponse> statuses;
      while (true) {
        RETURN_IF_ERROR(options_.ps->SnapshotStatusAll(*id, &statuses));
        bool all_done = true;
        for (int k = 0; k < num_ps(); ++k) {
          const SnapshotStatusResponse& r = statuses[k];
          switch (r.state()) {
            case SnapshotStatusResponse::DONE:
              break;
            case SnapshotStatusResponse::WRITING:
              all_done = false;
              break;
            case SnapshotStatusResponse::FAILED:
              return absl::InternalError(absl::StrCat("ps ", k, " could not write its file: ",
                                                      r.error()));
            default:
              return WithDetail(absl::AbortedError(absl::StrCat(
                                    "ps ", k, " no longer knows checkpoint ", *id,
                                    " (it restarted)")),
                                ErrorDetail::PS_STATE_LOST, k);
          }
        }
        if (all_done) break;
        {
          absl::MutexLock relock(&mu_);
          if (stopping_) return absl::CancelledError("the chief is stopping");
        }
        absl::SleepFor(absl::Milliseconds(20));
      }
      contents.checkpoint_id = *id;
      contents.snapshots = snapshots;
      int64_t bytes = 0;
      for (const SnapshotStatusResponse& r : statuses) {
        contents.files.push_back(r.file());
        bytes += r.file().bytes();
      }
      for (const VariableDef& def : defs) {
        ASSIGN_OR_RETURN(VariableLayout layout, options_.ps->GetLayout(def.name));
        contents.variables.push_back(std::move(layout));
      }
      const absl::Time now = absl::Now();
      ASSIGN_OR_RETURN(Manifest manifest, BuildManifest(contents, UnixSeconds(now)));
      RETURN_IF_ERROR(dir.Commit(manifest));
      {
        // The base of the next increment; a ps that wrote a shard whole restarts the count.
        bool any_increment = false;
        for (const SnapshotResponse& r : snapshots) {
          for (const ShardInfo& shard : r.shards()) any_increment |= shard.base_checkpoint() > 0;
        }
        absl::MutexLock relock(&mu_);
        if (generation_ == generation) {
          incremental_base_ = *id;
          increments_ = any_increment ? increments_ + 1 : 0;
        }
      }
      absl::Status pruned = dir.Prune(keep, best, generation);
      if (!pruned.ok()) std::cerr << "chief: pruning old checkpoints: " << pruned << "\n";
      CheckpointInfo i;
      i.set_id(*id);
      i.set_path(*path);
      i.set_steps_done(barrier);
      i.set_unix_time(UnixSeconds(now));
      i.set_bytes(bytes);
      i.set_write_seconds(absl::ToDoubleSeconds(now - t0));
      i.set_pause_ms(pause_ms);
      i.set_final(final);
      return i;
    }();
    mu_.Lock();
    return info;
  }

  // Rolls the job back after a ps lost its state: waits for every ps to answer, moves them
  // to a new generation restored from the newest usable checkpoint, and restarts the queue
  // from that cut. Steps still in flight belong to the old generation: the ps refuse their
  // updates and their completions are ignored. Returns false to be retried later (a ps down
  // again, say).
  bool RecoverLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const absl::Time t0 = absl::Now();
    const std::string cause = recovery_cause_;
    paused_ = true;
    phase_ = absl::StrCat("recovering: ", cause);
    wake_ = true;
    // Every ps must answer first.
    std::vector<PsMonitor::PsView> views;
    while (true) {
      if (stopping_ || status_.state() != JobStatus::RUNNING || interrupted_) return true;
      views = monitor_->Views();
      int down = -1;
      for (size_t k = 0; k < views.size(); ++k) {
        if (!views[k].up) {
          down = static_cast<int>(k);
          break;
        }
      }
      if (down < 0) break;
      phase_ = absl::StrCat("recovering: ", cause, "; waiting for ps ", down, " (",
                            options_.ps_addresses[down], "): ", views[down].error);
      monitor_->ProbeNow();
      control_wake_ = false;
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return control_wake_ || stopping_;
      };
      mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(500));
    }
    int64_t generation = generation_;
    for (const PsMonitor::PsView& v : views) generation = std::max(generation, v.generation);
    ++generation;
    if (store_ != nullptr) {
      store_state_.generation = generation;  // before the ps move (see PrepareState)
      WriteStateLocked();
    }
    const int64_t done_before = scheduler_->done_steps();
    const JobSpec job = job_;
    const std::vector<VariableDef> defs = defs_;
    JobStore* store = store_.get();
    phase_ = absl::StrCat("recovering: ", cause, "; restoring generation ", generation);
    mu_.Unlock();
    absl::StatusOr<RollbackOutcome> rolled = RollBack(job, defs, store, generation);
    std::vector<absl::Status> statuses;
    std::vector<HealthResponse> health;
    const absl::Time health_sent = absl::Now();
    if (rolled.ok()) {
      options_.ps->HealthEach(/*from_chief=*/true, absl::Seconds(5), &statuses, &health);
    }
    mu_.Lock();
    if (!rolled.ok()) {
      phase_ = absl::StrCat("recovering: ", cause, "; restore failed, retrying: ",
                            rolled.status().message());
      std::cerr << "chief: " << phase_ << "\n";
      return false;
    }
    std::vector<uint64_t> incarnations;
    for (size_t k = 0; k < health.size(); ++k) {
      if (!statuses[k].ok()) {
        phase_ = absl::StrCat("recovering: ", cause, "; ps ", k, " failed after the restore: ",
                              statuses[k].message());
        return false;
      }
      incarnations.push_back(health[k].incarnation());
    }
    generation_ = generation;
    incremental_base_ = 0;  // the restored ps hold no record of earlier cuts
    increments_ = 0;
    expected_incarnation_ = incarnations;
    incarnations_checked_at_ = health_sent;
    absl::Status restored = scheduler_->Restore(rolled->steps_done, {}, scheduler_->total_steps());
    if (!restored.ok()) {
      status_.set_state(JobStatus::FAILED);
      status_.set_error(absl::StrCat("recovery: ", restored.message()));
      return true;
    }
    if (store_ != nullptr) {
      store_state_.generation_start_steps = rolled->steps_done;
      WriteStateLocked();
      absl::Status journal = store_->StartJournal(generation);
      if (!journal.ok()) std::cerr << "chief: step journal: " << journal << "\n";
    }
    final_checkpoint_done_ = false;
    last_checkpoint_steps_ = rolled->steps_done;
    const int64_t lost = std::max<int64_t>(0, done_before - rolled->steps_done);
    RecoveryInfo* r = status_.add_recoveries();
    r->set_unix_time(UnixSeconds(absl::Now()));
    r->set_cause(cause);
    r->set_action(rolled->checkpoint_id > 0
                      ? absl::StrCat("rolled back to checkpoint ", rolled->checkpoint_id,
                                     " (step ", rolled->steps_done, ")")
                      : std::string("re-initialized (no usable checkpoint)"));
    if (!rolled->skipped.empty()) {
      r->set_action(absl::StrCat(r->action(), "; skipped ", absl::StrJoin(rolled->skipped, "; ")));
    }
    r->set_steps_lost(lost);
    r->set_seconds(absl::ToDoubleSeconds(absl::Now() - t0));
    status_.set_steps_lost(status_.steps_lost() + lost);
    std::cerr << "chief: recovered from " << cause << ": " << r->action() << ", " << lost
              << " steps lost, " << r->seconds() << " s; generation " << generation << "\n";
    recovery_cause_.clear();
    paused_ = false;
    phase_.clear();
    wake_ = true;
    return true;
  }

  void WriteStateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status s = store_->WriteState(store_state_);
    if (!s.ok()) {
      status_.set_checkpoint_error(absl::StrCat("writing the job state: ", s.message()));
      std::cerr << "chief: " << status_.checkpoint_error() << "\n";
    }
  }

  void JoinThreadsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!dispatcher_.joinable() && !control_.joinable()) return;
    mu_.Unlock();
    if (dispatcher_.joinable()) dispatcher_.join();
    if (control_.joinable()) control_.join();
    mu_.Lock();
  }

  // ---------------------------------------------------------------------------------------
  // Status and dispatch.

  JobStatus StatusLocked(const std::vector<PsMonitor::PsView>& views) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JobStatus s = status_;
    for (const WorkerState& w : workers_) *s.add_workers() = w.info;
    const absl::Time now = absl::Now();
    for (size_t k = 0; k < views.size(); ++k) {
      const PsMonitor::PsView& v = views[k];
      PsInfo* p = s.add_ps();
      p->set_index(static_cast<int>(k));
      p->set_address(k < options_.ps_addresses.size() ? options_.ps_addresses[k] : "");
      p->set_incarnation(v.incarnation);
      p->set_generation(v.generation);
      p->set_bytes(v.bytes);
      if (!v.up) {
        p->set_state("unreachable");
        p->set_error(v.error);
        if (v.last_up != absl::InfinitePast()) {
          p->set_down_s(absl::ToDoubleSeconds(now - v.last_up));
        }
      } else if (RestartedLocked(k, v) && expected_incarnation_[k] != 0) {
        p->set_state(paused_ ? "restoring" : "restarted");
      } else {
        p->set_state("up");
      }
    }
    s.set_generation(generation_);
    if (status_.state() == JobStatus::RUNNING) {
      std::string phase = phase_;
      if (interrupted_) {
        phase = "interrupted: the chief is stopping; a restarted chief resumes";
      } else if (phase.empty() && scheduler_ != nullptr && !scheduler_->Finished()) {
        bool any_running = false;
        for (const WorkerState& w : workers_) any_running |= w.started_job == job_.job_id();
        if (!any_running && now - start_ > absl::Seconds(5)) {
          phase = absl::StrCat("waiting for workers: none runs the job",
                               last_worker_error_.empty() ? "" : " (last error: ",
                               last_worker_error_, last_worker_error_.empty() ? "" : ")");
        }
      }
      s.set_phase(phase);
    }
    if (scheduler_ != nullptr) {
      s.set_steps_done(scheduler_->done_steps());
      s.set_total_steps(scheduler_->total_steps());
      s.set_steps_requeued(scheduler_->requeued());
      s.set_training_done(scheduler_->Finished());
    }
    if (status_.state() != JobStatus::NO_JOB) {
      absl::Time end = job_ended_ ? end_ : now;
      s.set_elapsed_s(absl::ToDoubleSeconds(std::min(end, training_end_) - start_));
    }
    // Speed over the last ~10 s of completions.
    if (progress_.size() >= 2) {
      double dt = absl::ToDoubleSeconds(progress_.back().first - progress_.front().first);
      double steps = progress_.back().second - progress_.front().second;
      if (dt > 0) {
        s.set_steps_per_sec(steps / dt);
        s.set_examples_per_sec(steps / dt * job_.batch_size());
      }
    }
    if (!recent_.empty()) {
      double loss = 0, correct = 0, examples = 0, pull = 0, compute = 0, push = 0;
      for (const StepResponse& r : recent_) {
        loss += r.loss() * r.examples();
        correct += r.correct();
        examples += r.examples();
        pull += r.pull_ms();
        compute += r.compute_ms();
        push += r.push_ms();
      }
      s.set_pull_ms(pull / recent_.size());
      s.set_compute_ms(compute / recent_.size());
      s.set_push_ms(push / recent_.size());
      if (examples > 0) {
        s.set_loss(loss / examples);
        s.set_accuracy(correct / examples);
      }
    }
    if (s.error().empty() && status_.state() == JobStatus::RUNNING && !last_worker_error_.empty() &&
        !phase_.empty()) {
      s.set_error(last_worker_error_);
    }
    return s;
  }

  // The dispatcher: keeps up to StepsInFlight(job_) steps leased to each started worker,
  // probes failed ones, expires leases, and ends the job once nothing is in flight.
  void Dispatch() {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      absl::Time now = absl::Now();
      for (const auto& [step, worker] : scheduler_->ExpireLeases(now)) {
        // Once per worker, though several of its leases may expire together.
        if (workers_[worker].started_job == job_.job_id()) {
          MarkFailed(worker, absl::StrCat("step ", step, " lease expired"));
        }
      }
      for (int i = 0; i < num_workers(); ++i) {
        WorkerState& w = workers_[i];
        if (w.started_job != job_.job_id()) {
          // A failed or restarted worker is probed once every call to it has returned, so
          // that a lease it is given later is never confused with an old call.
          if (w.in_flight == 0 && now >= w.next_probe && status_.state() == JobStatus::RUNNING &&
              !interrupted_) {
            StartJobOn(i);
          }
          continue;
        }
        LeaseSteps(i, now);
        // An idle worker hears from the chief now and then (its orphan clock).
        if (w.in_flight == 0 && now - w.last_contact > absl::Seconds(5)) PingWorker(i);
      }
      if (status_.state() == JobStatus::RUNNING && scheduler_->Finished()) {
        if (training_end_ == absl::InfiniteFuture()) training_end_ = absl::Now();
        bool checkpointed = store_ == nullptr || final_checkpoint_done_;
        bool eval_done = !options_.has_evaluator || final_eval_ ||
                         absl::Now() - training_end_ > options_.final_eval_timeout;
        if (checkpointed && eval_done) status_.set_state(JobStatus::SUCCEEDED);
      }
      if (status_.state() != JobStatus::RUNNING) {
        // Let every call in flight drain (bounded by their deadlines), then end. A job that
        // failed or was cancelled waits for no final evaluation.
        bool busy = false;
        for (const WorkerState& w : workers_) busy |= w.in_flight > 0;
        if (training_end_ == absl::InfiniteFuture()) training_end_ = absl::Now();
        if (!busy) {
          end_ = absl::Now();
          job_ended_ = true;
          control_wake_ = true;
          return;
        }
      }
      wake_ = false;
      auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stopping_; };
      mu_.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(100));
    }
  }

  // Leases steps to worker i, if it runs the job, until it has StepsInFlight(job_) in flight
  // or none is ready. REQUIRES: mu_ held.
  void LeaseSteps(int i, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WorkerState& w = workers_[i];
    if (status_.state() != JobStatus::RUNNING || w.started_job != job_.job_id() || paused_ ||
        ps_paused_ || interrupted_) {
      return;
    }
    const int depth = StepsInFlight(job_);
    while (w.in_flight < depth) {
      absl::Time deadline = now + absl::Milliseconds(job_.step_timeout_ms());
      std::optional<StepTask> task = scheduler_->Lease(i, deadline);
      if (!task.has_value()) return;
      RunStepOn(i, *task, deadline);
    }
  }

  // Every step still leased to worker i goes back to the queue: with several steps in flight,
  // the one that failed (or expired) is not the worker's only one. Its other calls may still
  // return; a completion then counts if no other worker completed the step first.
  // REQUIRES: mu_ held.
  void MarkFailed(int i, const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    scheduler_->RequeueWorker(i);
    WorkerState& w = workers_[i];
    w.info.set_state("failed");
    w.info.set_failures(w.info.failures() + 1);
    w.info.set_error(why);
    w.started_job.clear();
    w.next_probe = absl::Now() + options_.probe_interval;
    last_worker_error_ = absl::StrCat("worker ", i, ": ", why);
  }

  void PingWorker(int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WorkerState& w = workers_[i];
    w.last_contact = absl::Now();
    auto call = std::make_shared<std::pair<WorkerStatusRequest, WorkerStatusResponse>>();
    ++inflight_;
    options_.workers[i]->StatusAsync(&call->first, &call->second, absl::Now() + absl::Seconds(5),
                                     [this, call](const absl::Status&) {
                                       absl::MutexLock lock(&mu_);
                                       --inflight_;
                                     });
  }

  // REQUIRES: mu_ held; nothing is in flight to the worker.
  void StartJobOn(int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WorkerState& w = workers_[i];
    ++w.in_flight;
    w.last_contact = absl::Now();
    if (w.info.state() != "failed" && w.info.state() != "unreachable") {
      w.info.set_state("starting");
    }
    auto call = std::make_shared<std::pair<StartJobRequest, StartJobResponse>>();
    *call->first.mutable_job() = job_;
    for (const std::string& a : options_.ps_addresses) call->first.add_ps_addresses(a);
    std::string job_id = job_.job_id();
    ++inflight_;
    options_.workers[i]->StartJobAsync(
        &call->first, &call->second, absl::Now() + absl::Seconds(30),
        [this, i, call, job_id](const absl::Status& s) {
          absl::MutexLock lock(&mu_);
          WorkerState& w = workers_[i];
          --w.in_flight;
          if (s.ok()) {
            w.started_job = job_id;
            w.refusals = 0;
            w.info.set_state("idle");
            w.info.set_error("");
            w.info.set_backend(call->second.backend());
          } else {
            const StepFailureKind kind = ClassifyStepFailure(s).kind;
            // A worker the chief cannot connect to that has not failed (one not up yet when
            // the job starts, say, as pods come up in any order) is unreachable, not failed.
            if (kind != StepFailureKind::kWorkerDown || w.info.state() == "failed") {
              w.info.set_state("failed");
            } else {
              w.info.set_state("unreachable");
            }
            w.info.set_error(std::string(s.message()));
            w.next_probe = absl::Now() + options_.probe_interval;
            if (kind == StepFailureKind::kStepFailed || kind == StepFailureKind::kIncompatible) {
              // The worker is up but refuses the job (say, it cannot read the data, or speaks
              // another protocol). The others go on; when every worker has refused it
              // max_step_attempts times in a row, the job cannot run. (A ps it cannot reach
              // is no refusal: the job waits for the ps.)
              last_worker_error_ = absl::StrCat("worker ", i, ": ", s.message());
              ++w.refusals;
              const bool all_refuse =
                  std::all_of(workers_.begin(), workers_.end(), [this](const WorkerState& x) {
                    return x.refusals >= options_.max_step_attempts;
                  });
              if (all_refuse && status_.state() == JobStatus::RUNNING) {
                scheduler_->Cancel();
                status_.set_state(JobStatus::FAILED);
                status_.set_error(absl::StrCat("workers refuse the job: ", last_worker_error_));
              }
            }
          }
          --inflight_;
          wake_ = true;
        });
  }

  // REQUIRES: mu_ held; the worker has started the job and fewer than StepsInFlight(job_)
  // steps in flight.
  void RunStepOn(int i, const StepTask& task, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WorkerState& w = workers_[i];
    ++w.in_flight;
    w.last_contact = absl::Now();
    w.info.set_state("busy");
    auto call = std::make_shared<std::pair<StepRequest, StepResponse>>();
    StepRequest& r = call->first;
    r.set_job_id(job_.job_id());
    r.set_step_id(task.step_id);
    r.set_epoch(task.epoch);
    r.set_batch_index(task.batch_index);
    r.set_min_version(task.min_version);
    r.set_sync(task.sync);
    r.set_sync_step(task.sync_step);
    r.set_replica(task.replica);
    r.set_generation(generation_);
    ++inflight_;
    options_.workers[i]->RunStepAsync(
        &call->first, &call->second, deadline, [this, i, call](const absl::Status& s) {
          absl::MutexLock lock(&mu_);
          OnStepDone(i, call->first, call->second, s);
          // The worker's next step goes out from here, not from the dispatcher's next round:
          // a thread switch less between one step's end and the next one's start. (The
          // dispatcher still runs, for what this leaves: other workers, the job's end.)
          if (!stopping_) LeaseSteps(i, absl::Now());
          --inflight_;
          wake_ = true;
        });
  }

  // REQUIRES: mu_ held.
  void OnStepDone(int i, const StepRequest& request, const StepResponse& response,
                  const absl::Status& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WorkerState& w = workers_[i];
    --w.in_flight;
    if (request.job_id() != job_.job_id()) return;
    // A worker marked failed or restarting (by its other call, or an expired lease) keeps
    // that state until StartJob succeeds again.
    const bool running = w.started_job == job_.job_id();
    if (request.generation() != generation_) {
      // A step of the timeline before a rollback: whatever it did is gone (the ps refuse
      // its updates); its step runs again in this generation.
      if (running) SetRunningState(w);
      return;
    }
    if (s.ok()) {
      if (running) SetRunningState(w);
      // With backup workers the completion that makes k of a sync step done makes its other
      // steps done too (superseded): the journal keeps the completions only, and a restore
      // from it supersedes the same steps again (Scheduler::Restore).
      if (scheduler_->Complete(request.step_id(), i)) {
        if (store_ != nullptr) {
          absl::Status journal = store_->Journal(request.step_id());
          if (!journal.ok() && status_.checkpoint_error().empty()) {
            status_.set_checkpoint_error(absl::StrCat("step journal: ", journal.message()));
          }
        }
        w.info.set_steps_done(w.info.steps_done() + 1);
        recent_.push_back(response);
        while (recent_.size() > 50) recent_.pop_front();
        absl::Time now = absl::Now();
        progress_.emplace_back(now, scheduler_->done_steps());
        while (progress_.size() > 2 && now - progress_.front().first > absl::Seconds(10)) {
          progress_.pop_front();
        }
        if (scheduler_->Finished() || store_ != nullptr) control_wake_ = true;
      }
      return;
    }
    scheduler_->Requeue(request.step_id(), i);
    const StepFailure failure = ClassifyStepFailure(s);
    switch (failure.kind) {
      case StepFailureKind::kUnknownJob:
        // The worker restarted and lost the job: start it again (once its other calls are
        // back). Its other steps cannot run there either.
        scheduler_->RequeueWorker(i);
        w.started_job.clear();
        w.info.set_state("starting");
        w.next_probe = absl::InfinitePast();
        return;
      case StepFailureKind::kWorkerDown:
        // Once per failure: the worker's other calls fail the same way when it is down.
        if (running) MarkFailed(i, s.ToString());
        return;
      case StepFailureKind::kIncompatible:
        // The worker speaks another protocol than a ps (or than this chief): no step can
        // run there, and none of this counts against the step. Probed again later (a
        // rolling upgrade may replace either side).
        if (running) MarkFailed(i, std::string(s.message()));
        return;
      case StepFailureKind::kPsUnavailable:
        // Not the worker's fault, nor the step's: the monitor looks at that ps now, and
        // the job pauses while it is unreachable.
        if (running) SetRunningState(w);
        last_worker_error_ = absl::StrCat("worker ", i, ": ", s.message());
        monitor_->ProbeNow();
        return;
      case StepFailureKind::kPsStateLost:
        if (running) SetRunningState(w);
        PsStateLostLocked(failure.ps_task, s.message());
        return;
      case StepFailureKind::kStale:
        if (running) SetRunningState(w);
        return;
      default:
        break;
    }
    if (running) SetRunningState(w);
    if (scheduler_->IsDone(request.step_id())) {
      // Nothing is left to fail: the step was done meanwhile, by another worker or, with
      // backup workers, by the k replicas of its sync step that arrived first (a straggler
      // then pulls parameters that have moved on too far: FAILED_PRECONDITION). The worker
      // takes its next step.
      return;
    }
    int attempts = ++step_attempts_[request.step_id()];
    last_worker_error_ = absl::StrCat("worker ", i, ": ", s.message());
    if (attempts >= options_.max_step_attempts && status_.state() == JobStatus::RUNNING) {
      scheduler_->Cancel();
      status_.set_state(JobStatus::FAILED);
      status_.set_error(absl::StrCat("step ", request.step_id(), " failed ", attempts,
                                     " times; last on worker ", i, ": ", s.ToString()));
    }
  }

  Options options_;
  std::unique_ptr<PsMonitor> monitor_;
  mutable absl::Mutex mu_;
  std::vector<WorkerState> workers_ ABSL_GUARDED_BY(mu_);
  JobSpec job_ ABSL_GUARDED_BY(mu_);
  std::vector<VariableDef> defs_ ABSL_GUARDED_BY(mu_);
  // Incremental checkpoints of dynamic tables: the committed checkpoint of this generation the
  // next one may be an increment on (0: none; the next is full), and how many increments are
  // chained on the last full one.
  int64_t incremental_base_ ABSL_GUARDED_BY(mu_) = 0;
  int increments_ ABSL_GUARDED_BY(mu_) = 0;
  JobStatus status_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Scheduler> scheduler_ ABSL_GUARDED_BY(mu_);
  std::deque<StepResponse> recent_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, int64_t>> progress_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, int> step_attempts_ ABSL_GUARDED_BY(mu_);
  std::string last_worker_error_ ABSL_GUARDED_BY(mu_);
  absl::Time start_ ABSL_GUARDED_BY(mu_);
  absl::Time end_ ABSL_GUARDED_BY(mu_);
  absl::Time training_end_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool final_eval_ ABSL_GUARDED_BY(mu_) = false;
  bool job_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool wake_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool starting_ ABSL_GUARDED_BY(mu_) = false;  // Submit is preparing a job
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;

  // Durable state of the current job. store_ is null without a usable checkpoint directory;
  // the control thread uses store_->dir() (immutable) without mu_, everything else under it.
  std::unique_ptr<JobStore> store_ ABSL_GUARDED_BY(mu_);
  JobStore::State store_state_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> expected_incarnation_ ABSL_GUARDED_BY(mu_);
  // When the Health calls that expected_incarnation_ came from (a recovery's) were sent: a
  // monitor view from an earlier probe says nothing about them.
  absl::Time incarnations_checked_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool paused_ ABSL_GUARDED_BY(mu_) = false;     // recovering: nothing is leased
  bool ps_paused_ ABSL_GUARDED_BY(mu_) = false;  // a ps is unreachable: nothing is leased
  std::string phase_ ABSL_GUARDED_BY(mu_);       // JobStatus.phase
  std::string recovery_cause_ ABSL_GUARDED_BY(mu_);  // non-empty: a rollback is needed
  bool control_wake_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::function<void(absl::StatusOr<CheckpointInfo>)>> checkpoint_waiters_
      ABSL_GUARDED_BY(mu_);
  int64_t last_checkpoint_steps_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_checkpoint_time_ ABSL_GUARDED_BY(mu_);
  bool final_checkpoint_done_ ABSL_GUARDED_BY(mu_) = false;
  // A final checkpoint that failed on a ps is taken again no sooner than this.
  absl::Time final_retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  bool interrupt_checkpoint_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupt_done_ ABSL_GUARDED_BY(mu_) = false;
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  std::thread dispatcher_;
  std::thread control_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Chief>> Chief::Create(Options options) {
  if (options.ps == nullptr) return absl::InvalidArgumentError("Chief needs a PsClient");
  if (options.workers.empty()) {
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
