#include "coordinator/chief.h"

#include <deque>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "coordinator/scheduler.h"
#include "coordinator/step_failure.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "worker/compute/model.h"
#include "worker/data/idx_reader.h"

namespace shardps {
namespace {

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
  }

  ~ChiefImpl() override {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (dispatcher_.joinable()) dispatcher_.join();
    // RPCs in flight reference this object: wait for them.
    absl::MutexLock lock(&mu_);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return inflight_ == 0; };
    mu_.AwaitWithTimeout(absl::Condition(&idle), absl::Seconds(30));
  }

  absl::StatusOr<SubmitJobResponse> Submit(const std::string& job_json) override {
    ASSIGN_OR_RETURN(JobSpec job, ParseJobSpec(job_json, num_workers()));
    {
      absl::MutexLock lock(&mu_);
      if (status_.state() == JobStatus::RUNNING) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job \"", status_.job_id(), "\" is still running; cancel it or wait"));
      }
    }
    // The chief reads the training set too: to size epochs, and to reject a job whose data
    // is missing before any worker starts.
    absl::StatusOr<Dataset> train = LoadFashionMnist(job.data_dir(), Split::kTrain);
    if (!train.ok()) {
      // The job file's content is at fault (it names the data), not the chief's state.
      return absl::InvalidArgumentError(absl::StrCat(
          "job: \"data_dir\": cannot load ", job.dataset(), ": ", train.status().message()));
    }
    ASSIGN_OR_RETURN(ModelSpec model,
                     ParseModelSpec(job.model(), train->feature_dim, train->num_classes));
    absl::BitGen gen;
    job.set_job_id(absl::StrCat(job.name(), "-", absl::Uniform<uint32_t>(gen)));

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
        break;
      case JobSpec::STALE:
        plan.mode = Scheduler::Mode::kStale;
        plan.staleness = job.staleness();
        break;
      default:
        return absl::InvalidArgumentError("job: \"mode\": unsupported");
    }
    ASSIGN_OR_RETURN(Scheduler scheduler, Scheduler::Create(plan));
    RETURN_IF_ERROR(CreateVariables(job, model));

    SubmitJobResponse response;
    response.set_job_id(job.job_id());
    response.set_total_steps(scheduler.total_steps());
    {
      absl::MutexLock lock(&mu_);
      if (dispatcher_.joinable()) {
        mu_.Unlock();
        dispatcher_.join();
        mu_.Lock();
      }
      job_ = job;
      scheduler_ = std::make_unique<Scheduler>(std::move(scheduler));
      status_ = JobStatus();
      status_.set_state(JobStatus::RUNNING);
      status_.set_job_id(job.job_id());
      status_.set_name(job.name());
      status_.set_steps_per_epoch(plan.steps_per_epoch);
      status_.set_mode(JobSpec::Mode_Name(job.mode()));
      *status_.mutable_job() = job;
      start_ = absl::Now();
      recent_.clear();
      progress_.clear();
      step_attempts_.clear();
      final_eval_ = false;
      job_ended_ = false;
      start_refusals_ = 0;
      training_end_ = absl::InfiniteFuture();
      for (WorkerState& w : workers_) {
        w.started_job.clear();
        w.info.set_state("starting");
        w.next_probe = absl::InfinitePast();
      }
      dispatcher_ = std::thread([this] { Dispatch(); });
    }
    return response;
  }

  JobStatus Status() override {
    absl::MutexLock lock(&mu_);
    return StatusLocked();
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
    if (request.final()) final_eval_ = true;
    wake_ = true;
    return absl::OkStatus();
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
  };

  // "busy" while a step is in flight, else "idle"; a worker that is failed or starting keeps
  // that state until its StartJob succeeds.
  static void SetRunningState(WorkerState& w) {
    w.info.set_state(w.in_flight > 0 ? "busy" : "idle");
  }

  int num_workers() const { return static_cast<int>(options_.workers.size()); }

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

  absl::Status CreateVariables(const JobSpec& job, const ModelSpec& model) {
    ASSIGN_OR_RETURN(auto partitioner, ParsePartitioner(job.partitioner()));
    ASSIGN_OR_RETURN(auto placer, ParsePlacement(job.placement(), options_.ps->num_ps()));
    std::vector<VariableDef> defs;
    for (const ParamInfo& param : Params(model)) {
      VariableDef def;
      def.name = absl::StrCat(job.name(), "/", param.name);
      def.shape = param.shape;
      bool is_kernel = param.shape.size() == 2;
      if (is_kernel) {
        def.initializer = job.kernel_initializer();
      } else {
        def.initializer.set_type(InitializerSpec::ZEROS);
      }
      def.optimizer = job.optimizer();
      if (job.mode() == JobSpec::SYNC) {
        def.update.set_mode(UpdateSpec::SYNC);
        def.update.set_num_replicas(job.num_replicas());
      }
      defs.push_back(def);
    }
    absl::Status s = options_.ps->CreateVariables(defs, *partitioner, placer.get());
    if (s.code() == absl::StatusCode::kAlreadyExists) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the ps tasks already hold variables of job \"", job.name(),
          "\" with other settings; use another job name or restart the ps tasks: ",
          s.message()));
    }
    return s;
  }

  JobStatus StatusLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    JobStatus s = status_;
    for (const WorkerState& w : workers_) *s.add_workers() = w.info;
    if (scheduler_ != nullptr) {
      s.set_steps_done(scheduler_->done_steps());
      s.set_total_steps(scheduler_->total_steps());
      s.set_steps_requeued(scheduler_->requeued());
      s.set_training_done(scheduler_->Finished());
    }
    if (status_.state() != JobStatus::NO_JOB) {
      absl::Time end = job_ended_ ? end_ : absl::Now();
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
          if (w.in_flight == 0 && now >= w.next_probe && status_.state() == JobStatus::RUNNING) {
            StartJobOn(i);
          }
          continue;
        }
        LeaseSteps(i, now);
      }
      if (status_.state() == JobStatus::RUNNING && scheduler_->Finished()) {
        if (training_end_ == absl::InfiniteFuture()) training_end_ = absl::Now();
        bool eval_done = !options_.has_evaluator || final_eval_ ||
                         absl::Now() - training_end_ > options_.final_eval_timeout;
        if (eval_done) status_.set_state(JobStatus::SUCCEEDED);
      }
      if (status_.state() != JobStatus::RUNNING) {
        // Let every call in flight drain (bounded by their deadlines), then end.
        bool busy = false;
        for (const WorkerState& w : workers_) busy |= w.in_flight > 0;
        bool eval_wait = options_.has_evaluator && !final_eval_ &&
                         absl::Now() - training_end_ < options_.final_eval_timeout &&
                         status_.state() != JobStatus::SUCCEEDED;
        if (training_end_ == absl::InfiniteFuture()) training_end_ = absl::Now();
        if (!busy && !eval_wait) {
          end_ = absl::Now();
          job_ended_ = true;
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
    if (status_.state() != JobStatus::RUNNING || w.started_job != job_.job_id()) return;
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
    w.started_job.clear();
    w.next_probe = absl::Now() + options_.probe_interval;
    last_worker_error_ = absl::StrCat("worker ", i, ": ", why);
  }

  // REQUIRES: mu_ held; nothing is in flight to the worker.
  void StartJobOn(int i) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    WorkerState& w = workers_[i];
    ++w.in_flight;
    if (w.info.state() != "failed") w.info.set_state("starting");
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
            w.info.set_state("idle");
            w.info.set_backend(call->second.backend());
          } else {
            w.info.set_state("failed");
            w.next_probe = absl::Now() + options_.probe_interval;
            if (ClassifyStepFailure(s).kind == StepFailureKind::kStepFailed) {
              // The worker is up but refuses the job (say, it cannot read the data). When
              // every worker keeps refusing, the job cannot run. (A ps it cannot reach is
              // no refusal: the job waits for the ps.)
              last_worker_error_ = absl::StrCat("worker ", i, ": ", s.message());
              if (++start_refusals_ >= options_.max_step_attempts * num_workers() &&
                  status_.state() == JobStatus::RUNNING) {
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
    if (s.ok()) {
      if (running) SetRunningState(w);
      if (scheduler_->Complete(request.step_id(), i)) {
        w.info.set_steps_done(w.info.steps_done() + 1);
        recent_.push_back(response);
        while (recent_.size() > 50) recent_.pop_front();
        absl::Time now = absl::Now();
        progress_.emplace_back(now, scheduler_->done_steps());
        while (progress_.size() > 2 && now - progress_.front().first > absl::Seconds(10)) {
          progress_.pop_front();
        }
      }
      return;
    }
    scheduler_->Requeue(request.step_id(), i);
    const StepFailure failure = ClassifyStepFailure(s);
    if (failure.kind == StepFailureKind::kUnknownJob) {
      // The worker restarted and lost the job: start it again (once its other calls are
      // back). Its other steps cannot run there either.
      scheduler_->RequeueWorker(i);
      w.started_job.clear();
      w.info.set_state("starting");
      w.next_probe = absl::InfinitePast();
      return;
    }
    if (failure.kind == StepFailureKind::kWorkerDown) {
      // Once per failure: the worker's other calls fail the same way when it is down.
      if (running) MarkFailed(i, s.ToString());
      return;
    }
    if (running) SetRunningState(w);
    if (failure.kind == StepFailureKind::kStale ||
        failure.kind == StepFailureKind::kPsUnavailable ||
        failure.kind == StepFailureKind::kPsStateLost) {
      // Not the worker's fault, nor the step's: it runs again, no attempt counted. (A ps
      // failure pauses the job for recovery: the chief's recovery takes it from here.)
      return;
    }
    int attempts = ++step_attempts_[request.step_id()];
    if (attempts >= options_.max_step_attempts && status_.state() == JobStatus::RUNNING) {
      scheduler_->Cancel();
      status_.set_state(JobStatus::FAILED);
      status_.set_error(absl::StrCat("step ", request.step_id(), " failed ", attempts,
                                     " times; last on worker ", i, ": ", s.ToString()));
    }
  }

  Options options_;
  mutable absl::Mutex mu_;
  std::vector<WorkerState> workers_ ABSL_GUARDED_BY(mu_);
  JobSpec job_ ABSL_GUARDED_BY(mu_);
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
  int inflight_ ABSL_GUARDED_BY(mu_) = 0;
  int start_refusals_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread dispatcher_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Chief>> Chief::Create(Options options) {
  if (options.ps == nullptr) return absl::InvalidArgumentError("Chief needs a PsClient");
  if (options.workers.empty()) {
    return absl::InvalidArgumentError("the cluster has no worker tasks");
  }
  return std::unique_ptr<Chief>(new ChiefImpl(std::move(options)));
}

}  // namespace shardps
