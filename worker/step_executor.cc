#include "worker/step_executor.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "common/error_detail.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "compute/compute_device.h"
#include "google/protobuf/util/message_differencer.h"
#include "data/batcher.h"
#include "data/dataset.h"
#include "model/external/external_model.h"
#include "model/model.h"
#include "worker/own_gradient.h"

namespace shardps {
namespace {

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

double MillisSince(absl::Time start) { return absl::ToDoubleMilliseconds(absl::Now() - start); }

// Waits for a fixed number of asynchronous client calls (every one is counted, successful or
// not, since each writes into the step's buffers until it completes) and keeps the first
// error; each call may record the versions it read in its own PullVersions.
class CallGroup {
 public:
  explicit CallGroup(size_t calls) : left_(calls), versions_(calls) {}

  PullVersions* versions(size_t call) { return &versions_[call]; }

  void Done(const absl::Status& s) {
    absl::MutexLock lock(&mu_);
    if (status_.ok() && !s.ok()) status_ = s;
    --left_;
  }

  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](size_t* left) { return *left == 0; }, &left_));
    return status_;
  }

  // The range of versions every call read and every shard's. REQUIRES: Wait returned OK.
  PullVersions MergedVersions() const {
    PullVersions merged;
    bool any = false;
    for (const PullVersions& v : versions_) {
      if (v.shards.empty()) continue;
      merged.min_version = any ? std::min(merged.min_version, v.min_version) : v.min_version;
      merged.max_version = any ? std::max(merged.max_version, v.max_version) : v.max_version;
      merged.shards.insert(v.shards.begin(), v.shards.end());
      any = true;
    }
    return merged;
  }

 private:
  absl::Mutex mu_;
  size_t left_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<PullVersions> versions_;
};

// Steps of one job that run at once: while one computes, another pulls or pushes.
constexpr int kStepSlots = 2;

// One running step's buffers (sized by the model for its batch: variables read whole at
// their size, those read by rows for the batch's rows). A slot belongs to one RunStep from
// before its batch is prepared until its push has completed (the pushes send straight from
// the gradients); only that step touches it.
using StepSlot = StepBuffers;

// Everything a started job needs. Immutable after StartJob, except the slots, which belong to
// the steps that hold them (slot_busy), and the own-gradient state (the compute thread's).
struct Job {
  JobSpec spec;
  std::vector<std::string> ps_addresses;
  std::unique_ptr<Model> model;
  std::vector<std::string> variables;  // "{job name}/{variable}", in model->variables() order
  std::shared_ptr<const DataSource> data;
  std::unique_ptr<Batcher> batcher;
  std::unique_ptr<PsClient> ps;
  std::unique_ptr<ModelCompute> compute;  // the model's, on the worker's device
  std::string backend_name;

  absl::Mutex slot_mu;
  bool slot_busy[kStepSlots] ABSL_GUARDED_BY(slot_mu) = {};
  StepSlot slots[kStepSlots];

  // Null unless the job applies its own gradient (JobSpec.own_gradient).
  std::unique_ptr<OwnGradient> own;
};

// Ends a computed step's part in its job's OwnGradient push ordering when it goes out of
// scope: PushEnded once its push began, else Skip (it failed before its push, and never
// pushes now).
class OwnPushMark {
 public:
  OwnPushMark(OwnGradient* own, uint64_t seq) : own_(own), seq_(seq) {}
  ~OwnPushMark() {
    if (own_ == nullptr) return;
    if (started_) {
      own_->PushEnded(seq_);
    } else {
      own_->Skip(seq_);
    }
  }
  OwnPushMark(const OwnPushMark&) = delete;
  OwnPushMark& operator=(const OwnPushMark&) = delete;

  void Starting() {
    if (own_ == nullptr) return;
    own_->PushStarting(seq_);
    started_ = true;
  }

 private:
  OwnGradient* const own_;
  const uint64_t seq_;
  bool started_ = false;
};

// A slot of `job` held for the lifetime of this object: the constructor waits until one is
// free (slot 0 first, so a worker given one step at a time only ever sizes one).
class SlotHold {
 public:
  explicit SlotHold(Job* job) : job_(job) {
    {
      absl::MutexLock lock(&job->slot_mu);
      auto free = [job]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(job->slot_mu) {
        for (bool busy : job->slot_busy) {
          if (!busy) return true;
        }
        return false;
      };
      job->slot_mu.Await(absl::Condition(&free));
      while (job->slot_busy[index_]) ++index_;
      job->slot_busy[index_] = true;
    }
  }
  ~SlotHold() {
    absl::MutexLock lock(&job_->slot_mu);
    job_->slot_busy[index_] = false;
  }
  SlotHold(const SlotHold&) = delete;
  SlotHold& operator=(const SlotHold&) = delete;

  StepSlot& slot() { return job_->slots[index_]; }

 private:
  Job* const job_;
  int index_ = 0;
};

// Runs every step's compute on one thread of its own, one at a time: the forward and backward
// pass then always finds its thread's caches, allocator arenas and core warm, whichever RPC
// thread carries the step.
class ComputeThread {
 public:
  ComputeThread() : thread_([this] { Loop(); }) {}
  ~ComputeThread() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    thread_.join();
  }

  // Runs fn on the compute thread after the computes queued before it; returns when done.
  void Run(absl::FunctionRef<void()> fn) {
    absl::Notification done;
    {
      absl::MutexLock lock(&mu_);
      queue_.push_back({fn, &done});
    }
    done.WaitForNotification();
  }

 private:
  struct Item {
    absl::FunctionRef<void()> fn;
    absl::Notification* done;
  };

  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stop_, and nothing left to run
      Item item = queue_.front();
      queue_.pop_front();
      mu_.Unlock();
      item.fn();
      item.done->Notify();
      mu_.Lock();
    }
  }

  absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Whether the job's workers keep their own last update: JobSpec.own_gradient (DEFAULT
// resolved as ParseJobSpec does, coordinator/job_spec.h), and only when the chief leases more
// than one step at a time (steps_in_flight 0: unset, the mode's default of 2 in async); with
// one step in flight no step computes without its predecessor's update, and the local
// optimizer pass would be work for nothing on every step.
bool AppliesOwnGradient(const JobSpec& spec) {
  if (spec.steps_in_flight() == 1) return false;
  if (spec.own_gradient() == JobSpec::OWN_GRADIENT_DEFAULT) return spec.mode() != JobSpec::SYNC;
  return spec.own_gradient() == JobSpec::OWN_GRADIENT_APPLY;
}

// What StartJob checks of a request before it loads or connects anything: the batch size,
// the dataset's name, the ps addresses and the backend text. Returns the backend kind the job
// runs on: `override_kind` unless that is kAuto, else the job's own choice. `what` names the
// job in the errors.
absl::StatusOr<BackendKind> CheckStartRequest(const StartJobRequest& request,
                                              BackendKind override_kind, const std::string& what) {
  const JobSpec& spec = request.job();
  if (spec.batch_size() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": batch_size must be positive, got ", spec.batch_size()));
  }
  if (spec.model() != kExternalModel) {  // an external model's data is the user's
    RETURN_IF_ERROR(Annotate(CheckDatasetName(spec.dataset()), what));
  }
  if (request.ps_addresses().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no ps addresses"));
  }
  BackendKind kind = override_kind;
  if (kind == BackendKind::kAuto && !spec.backend().empty()) {
    absl::StatusOr<BackendKind> parsed = ParseBackendKind(spec.backend());
    if (!parsed.ok()) return Annotate(parsed.status(), absl::StrCat(what, ": backend"));
    kind = *parsed;
  }
  return kind;
}

// Fills job->variables with the ps names of the model's variables, after checking that the
// ps tasks hold each with the model's shape (FAILED_PRECONDITION naming the variable).
absl::Status CheckVariables(Job* job, const std::string& what) {
  const JobSpec& spec = job->spec;
  for (const VariableInfo& param : job->model->variables()) {
    std::string name = absl::StrCat(spec.name(), "/", param.name);
    absl::StatusOr<VariableLayout> layout = job->ps->GetLayout(name);
    if (!layout.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": variable \"", name, "\" of model \"", spec.model(),
          "\" is not on the ps tasks (the chief creates it before it starts the job)"));
    }
    if (layout->shape != param.shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": variable \"", name, "\" has shape ", ShapeString(layout->shape),
          " on the ps tasks; model \"", spec.model(), "\" needs ", ShapeString(param.shape)));
    }
    job->variables.push_back(std::move(name));
  }
  return absl::OkStatus();
}

// The job's own-gradient state, or null when it goes without: AppliesOwnGradient says no, or
// a variable is read by rows (each step's rows differ; see docs/embeddings.md), or the
// optimizer spec cannot be created. The ps refuses the variables of such a spec and the step
// then fails there; a spec without one (a client that leaves the optimizer to the ps's
// variables) just goes without the worker's own update, which is logged.
std::unique_ptr<OwnGradient> NewOwnGradient(const Job& job, const std::string& what) {
  if (!AppliesOwnGradient(job.spec)) return nullptr;
  std::vector<size_t> dense_sizes;
  for (const VariableInfo& param : job.model->variables()) {
    if (param.access != VariableAccess::kDense) return nullptr;
    dense_sizes.push_back(static_cast<size_t>(param.num_elements()));
  }
  absl::StatusOr<std::unique_ptr<OwnGradient>> own =
      OwnGradient::Create(job.spec.optimizer(), dense_sizes);
  if (!own.ok()) {
    LogWarning() << what << ": not applying its own gradient locally: " << own.status().message();
    return nullptr;
  }
  return *std::move(own);
}

// "step 7 (epoch 0, batch 3)": how errors name a step.
std::string StepName(const StepRequest& request) {
  return absl::StrCat("step ", request.step_id(), " (epoch ", request.epoch(), ", batch ",
                      request.batch_index(), ")");
}

// One run of a step of `job` in a slot its caller holds: the pull, the compute and the push,
// called once each in that order (each only after the one before succeeded), while the
// caller keeps the job, the request and the slot alive. Each returns its phase's error
// annotated with the step, and adds the phase's figures to response().
class StepRun {
 public:
  // `what` names the step in errors (StepName).
  StepRun(Job* job, const StepRequest& request, std::string what, StepSlot* slot)
      : job_(*job),
        request_(request),
        slot_(*slot),
        what_(std::move(what)),
        // A sync step (even of a job started as async) computes on exactly its version.
        own_(request.sync() ? nullptr : job->own.get()) {}
  StepRun(const StepRun&) = delete;
  StepRun& operator=(const StepRun&) = delete;

  StepResponse& response() { return response_; }

  // Pulls every parameter into the slot and prepares the batch of `indices` there. The whole
  // variables' pull goes out first and the batch is prepared while it is in flight; the rows
  // the batch names are pulled once it is prepared. The pulls write into the slot: this waits
  // for them in any case. Errors: the batch's, then the pull's.
  absl::Status Pull(const std::vector<int64_t>& indices, absl::Duration wait_timeout) {
    SizeDenseBuffers(job_.model->variables(), &slot_);
    const absl::Time pull_start = absl::Now();
    PullOptions pull_options;
    pull_options.min_version = request_.min_version();
    pull_options.wait_timeout = wait_timeout;
    // A sync step computes on exactly its version, even when it is a re-run and some ps has
    // applied the step meanwhile (the first run's pushes got there before it died): the run
    // is then bit-identical to a run without the failure.
    pull_options.exact_version = request_.sync();
    CallGroup pulls(2);  // the dense variables, and the tables' rows
    StartDensePull(pull_options, &pulls);
    absl::Status prepared = job_.model->PrepareBatch(*job_.data, indices, &slot_);
    StartRowsPull(pull_options, prepared.ok(), &pulls);
    const absl::Status pull_status = pulls.Wait();
    const absl::Time pull_end = absl::Now();
    RETURN_IF_ERROR(Annotate(prepared, what_));
    RETURN_IF_ERROR(Annotate(pull_status, absl::StrCat(what_, ": pull")));
    versions_ = pulls.MergedVersions();
    response_.set_version(versions_.min_version);
    response_.set_pull_ms(absl::ToDoubleMilliseconds(pull_end - pull_start));
    return absl::OkStatus();
  }

  // Forward and backward on `thread` (after the computes queued before it), into *result and
  // the slot's gradients; with an OwnGradient, first adds the job's previous update when the
  // pull lacked it. compute_ms is the compute alone, not the wait for another step's.
  absl::Status Compute(ComputeThread* thread, StepResult* result) {
    uint64_t seq = 0;  // this step's compute sequence number
    absl::Status computed;
    double compute_ms = 0;
    bool own_applied = false;
    thread->Run([&] {
      const absl::Time start = absl::Now();
      if (own_ != nullptr) {
        seq = own_->BeginCompute();
        own_applied = own_->ApplyBefore(seq, pull_mark_, absl::MakeSpan(slot_.values));
      }
      computed = job_.model->ForwardBackward(job_.compute.get(), &slot_, result);
      if (own_ != nullptr) own_->EndCompute(seq, slot_.grads, computed.ok());
      compute_ms = MillisSince(start);
    });
    response_.set_compute_ms(compute_ms);
    response_.set_own_gradient_applied(own_applied);
    own_push_.emplace(own_, seq);
    return Annotate(computed, absl::StrCat(what_, ": compute"));
  }

  // Pushes every gradient (rows and whole variables at once) with the step's idempotency key,
  // generation and pulled versions, and waits for both pushes.
  absl::Status Push() {
    const absl::Time start = absl::Now();
    own_push_->Starting();
    PushOptions push_options;
    push_options.idempotency_key =
        StepIdempotencyKey(request_.job_id(), request_.step_id(), request_.generation());
    push_options.generation = request_.generation();
    push_options.base_versions = &versions_;  // for the ps' staleness policy, if any
    push_options.step = request_.step_id();   // a checkpoint cut may hold it
    if (request_.sync()) {
      push_options.has_sync = true;
      push_options.sync.set_step(request_.sync_step());
      push_options.sync.set_replica(request_.replica());
    }
    CallGroup pushes(2);
    std::vector<PsClient::PushSource> sources;
    std::vector<PsClient::RowsPushSource> row_sources;
    const std::vector<VariableInfo>& vars = job_.model->variables();
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i].access == VariableAccess::kRows) {
        row_sources.push_back({job_.variables[i], slot_.ids[i], slot_.grads[i]});
      } else {
        sources.push_back({job_.variables[i], absl::MakeConstSpan(slot_.grads[i])});
      }
    }
    auto done = [&pushes](const absl::Status& s) { pushes.Done(s); };
    if (!row_sources.empty()) {
      job_.ps->PushRowsManyAsync(std::move(row_sources), push_options, done);
    } else {
      pushes.Done(absl::OkStatus());
    }
    if (!sources.empty()) {
      job_.ps->PushAsync(std::move(sources), push_options, done);
    } else {
      pushes.Done(absl::OkStatus());
    }
    RETURN_IF_ERROR(Annotate(pushes.Wait(), absl::StrCat(what_, ": push")));
    response_.set_push_ms(MillisSince(start));
    return absl::OkStatus();
  }

 private:
  // The whole variables' pull, call 0 of `pulls` (done at once when there are none). With an
  // OwnGradient, it marks which of the job's pushes the pull holds (worker/own_gradient.h); a
  // pull that waits for a version is not kept apart from pushes. (A job with an OwnGradient
  // reads every variable whole: its one pull is this one.)
  void StartDensePull(const PullOptions& pull_options, CallGroup* pulls) {
    const std::vector<VariableInfo>& vars = job_.model->variables();
    std::vector<PsClient::PullTarget> targets;
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i].access != VariableAccess::kDense) continue;
      targets.push_back({job_.variables[i], absl::MakeSpan(slot_.values[i])});
    }
    if (targets.empty()) {
      pulls->Done(absl::OkStatus());
      return;
    }
    if (own_ != nullptr) pull_mark_ = own_->PullStarted(request_.min_version() == 0);
    job_.ps->PullAsync(std::move(targets), pull_options, pulls->versions(0),
                       [this, pulls](const absl::Status& s) {
                         if (own_ != nullptr) own_->PullEnded(&pull_mark_);
                         pulls->Done(s);
                       });
  }

  // Every table's rows that the prepared batch names in one call (one batch per ps): call 1
  // of `pulls` (done at once when there are none, or the batch was not `prepared`).
  void StartRowsPull(const PullOptions& pull_options, bool prepared, CallGroup* pulls) {
    const std::vector<VariableInfo>& vars = job_.model->variables();
    std::vector<PsClient::RowsPullTarget> row_targets;
    for (size_t i = 0; i < vars.size(); ++i) {
      if (vars[i].access == VariableAccess::kRows && prepared) {
        row_targets.push_back({job_.variables[i], slot_.ids[i], absl::MakeSpan(slot_.values[i])});
      }
    }
    if (row_targets.empty()) {
      pulls->Done(absl::OkStatus());
      return;
    }
    job_.ps->PullRowsManyAsync(std::move(row_targets), pull_options, pulls->versions(1),
                               [pulls](const absl::Status& s) { pulls->Done(s); });
  }

  Job& job_;
  const StepRequest& request_;
  StepSlot& slot_;
  const std::string what_;
  OwnGradient* const own_;  // null: the step goes without the job's own update
  OwnGradient::PullMark pull_mark_;
  PullVersions versions_;  // what the pull read, once it succeeded
  // From the compute on: ends the step's part in the OwnGradient push ordering.
  std::optional<OwnPushMark> own_push_;
  StepResponse response_;
};

class StepExecutorImpl : public StepExecutor {
 public:
  explicit StepExecutorImpl(Options options) : options_(std::move(options)) {}

  // Opens the initial device. REQUIRES: called once, before the object is shared.
  absl::Status Init() {
    absl::MutexLock start_lock(&start_mu_);
    RETURN_IF_ERROR(EnsureDevice(options_.backend_override));
    absl::MutexLock lock(&mu_);
    backend_name_ = device_->Name();
    return absl::OkStatus();
  }

  absl::StatusOr<StartJobResponse> StartJob(const StartJobRequest& request) override {
    const JobSpec& spec = request.job();
    if (spec.job_id().empty()) {
      return absl::InvalidArgumentError("StartJob: job.job_id is empty");
    }
    absl::MutexLock start_lock(&start_mu_);
    StartJobResponse response;
    std::vector<std::string> addresses(request.ps_addresses().begin(),
                                       request.ps_addresses().end());
    if (std::optional<std::string> backend = SameStartBackend(spec, addresses)) {
      response.set_backend(*backend);
      return response;
    }
    const std::string what = absl::StrCat("job \"", spec.job_id(), "\"");
    ASSIGN_OR_RETURN(const BackendKind kind,
                     CheckStartRequest(request, options_.backend_override, what));
    ASSIGN_OR_RETURN(std::shared_ptr<Job> job, PrepareJob(spec, kind, addresses, what));
    response.set_backend(job->backend_name);
    absl::MutexLock lock(&mu_);
    job_ = std::move(job);
    backend_name_ = job_->backend_name;
    steps_run_ = 0;
    return response;
  }

  // Up to kStepSlots steps of a job run here at once, each in its own slot; only their
  // computes take turns (compute_thread_), so one step's pull and another's push overlap a
  // compute. A step returns once its push is done: the chief counts it only then.
  absl::StatusOr<StepResponse> RunStep(const StepRequest& request) override {
    ASSIGN_OR_RETURN(std::shared_ptr<Job> job, CurrentJob(request.job_id()));
    const std::string what = StepName(request);
    absl::StatusOr<std::vector<int64_t>> indices =
        job->batcher->BatchIndices(request.epoch(), request.batch_index(), job->spec.batch_size());
    if (!indices.ok()) return Annotate(indices.status(), what);
    const int batch = static_cast<int>(indices->size());

    SlotHold hold(job.get());
    StepRun run(job.get(), request, what, &hold.slot());
    RETURN_IF_ERROR(run.Pull(*indices, options_.pull_wait_timeout));
    StepResult result;
    RETURN_IF_ERROR(run.Compute(&compute_thread_, &result));
    absl::SleepFor(options_.test_only_delay_before_push);  // zero but in tests
    RETURN_IF_ERROR(run.Push());

    StepResponse& response = run.response();
    response.set_loss(result.loss);
    response.set_correct(result.correct);
    response.set_examples(batch);
    absl::MutexLock lock(&mu_);
    if (job_ == job) ++steps_run_;
    return response;
  }

  WorkerStatusResponse Status() override {
    WorkerStatusResponse response;
    response.set_task_index(options_.task_index);
    absl::MutexLock lock(&mu_);
    response.set_backend(backend_name_);
    if (job_ != nullptr) response.set_job_id(job_->spec.job_id());
    response.set_steps_run(steps_run_);
    return response;
  }

  std::string BackendName() override {
    absl::MutexLock lock(&mu_);
    return backend_name_;
  }

 private:
  // The current job's backend name when `spec` and `addresses` are those it was started with
  // (a chief re-sending the start, which then changes nothing). The same job with any other
  // spec or ps list (a chief restarted with another partitioner, say) is started afresh: the
  // shard layout it was discovered with may be stale.
  std::optional<std::string> SameStartBackend(const JobSpec& spec,
                                              const std::vector<std::string>& addresses)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (job_ != nullptr && job_->ps_addresses == addresses &&
        google::protobuf::util::MessageDifferencer::Equals(job_->spec, spec)) {
      return job_->backend_name;
    }
    return std::nullopt;
  }

  // A job of `spec` ready to run its steps on a device of kind `kind`: its data, model and
  // compute, a client to the ps tasks at `addresses` that holds every variable of the model,
  // its batcher and its own-gradient state. `what` names the job in errors. REQUIRES:
  // start_mu_ held.
  absl::StatusOr<std::shared_ptr<Job>> PrepareJob(const JobSpec& spec, BackendKind kind,
                                                  const std::vector<std::string>& addresses,
                                                  const std::string& what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(start_mu_) {
    auto job = std::make_shared<Job>();
    job->spec = spec;
    if (spec.model() == kExternalModel) {
      // Its data and compute are the user's: the model says who runs it.
      absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(spec, ExternalDatasetInfo(spec));
      if (!model.ok()) return Annotate(model.status(), what);
      return Annotate((*model)->NewCompute(ComputeDevice::Cpu(1)).status(), what);
    }
    ASSIGN_OR_RETURN(job->data, LoadData(spec.dataset(), spec.data_dir()));
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(spec, job->data->info());
    if (!model.ok()) return Annotate(model.status(), what);
    job->model = *std::move(model);

    RETURN_IF_ERROR(EnsureDevice(kind));
    absl::StatusOr<std::unique_ptr<ModelCompute>> compute = job->model->NewCompute(*device_);
    if (!compute.ok()) return Annotate(compute.status(), "creating the compute backend");
    job->compute = *std::move(compute);
    job->backend_name = job->compute->Name();

    absl::StatusOr<std::unique_ptr<PsClient>> ps = options_.connect(addresses);
    if (!ps.ok()) {
      return Annotate(ps.status(),
                      absl::StrCat(what, ": connecting to ps ", absl::StrJoin(addresses, ",")));
    }
    job->ps = *std::move(ps);
    job->ps_addresses = addresses;
    RETURN_IF_ERROR(
        Annotate(job->ps->Discover(), absl::StrCat(what, ": listing the ps tasks' variables")));
    RETURN_IF_ERROR(CheckVariables(job.get(), what));
    job->batcher = std::make_unique<Batcher>(job->data->info().num_examples, spec.seed());
    job->own = NewOwnGradient(*job, what);
    return job;
  }

  // The current job, when it is job `job_id`; else FAILED_PRECONDITION with ErrorDetail
  // UNKNOWN_JOB.
  absl::StatusOr<std::shared_ptr<Job>> CurrentJob(const std::string& job_id)
      ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (job_ == nullptr || job_->spec.job_id() != job_id) {
      return WithDetail(
          absl::FailedPreconditionError(absl::StrCat(
              "unknown job \"", job_id, "\": this worker ",
              job_ == nullptr ? "has no job"
                              : absl::StrCat("runs job \"", job_->spec.job_id(), "\""),
              "; send StartJob first")),
          ErrorDetail::UNKNOWN_JOB);
    }
    return job_;
  }

  // Makes device_ one of kind `kind` (kAuto resolved), keeping the current one when it is of
  // that kind already. REQUIRES: start_mu_ held.
  absl::Status EnsureDevice(BackendKind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(start_mu_) {
    const BackendChoice choice = ResolveBackendKind(kind);
    const BackendKind resolved = choice.kind;
    if (device_.has_value() && device_->kind() == resolved) return absl::OkStatus();
    if (!choice.fallback_reason.empty()) {
      LogInfo() << "compute backend auto: using the CPU, the GPU backend is not available: "
                << choice.fallback_reason;
    }
    absl::StatusOr<ComputeDevice> device = ComputeDevice::Open(resolved, options_.num_threads);
    if (!device.ok()) return Annotate(device.status(), "creating the compute backend");
    device_ = *std::move(device);
    return absl::OkStatus();
  }

  // The training split of dataset `name` in `dir` (empty: the dataset's default), from the
  // cache when it was loaded last. REQUIRES: start_mu_ held.
  absl::StatusOr<std::shared_ptr<const DataSource>> LoadData(const std::string& name,
                                                             const std::string& dir)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(start_mu_) {
    if (data_ != nullptr && data_name_ == name && data_dir_ == dir) return data_;
    std::string confined = dir;
    if (!dir.empty()) {
      ASSIGN_OR_RETURN(confined, options_.data_root.ResolveInput(dir, "the job's data_dir"));
    }
    absl::StatusOr<std::shared_ptr<const DataSource>> data =
        LoadDataSource(name, confined, Split::kTrain);
    if (!data.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot load the training set from data_dir \"", DatasetDir(name, dir),
                       "\": ", data.status().message()));
    }
    data_ = *std::move(data);
    data_name_ = name;
    data_dir_ = dir;
    return data_;
  }

  const Options options_;

  // Held for the whole of StartJob, so that two starts do not load and connect twice.
  absl::Mutex start_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Where every job's compute runs; each job's model makes its own compute there.
  std::optional<ComputeDevice> device_ ABSL_GUARDED_BY(start_mu_);
  std::shared_ptr<const DataSource> data_ ABSL_GUARDED_BY(start_mu_);
  std::string data_name_ ABSL_GUARDED_BY(start_mu_);
  std::string data_dir_ ABSL_GUARDED_BY(start_mu_);

  // Every step's compute, of any job: one at a time.
  ComputeThread compute_thread_;

  // Short critical sections only: Status() takes it on gRPC's thread.
  absl::Mutex mu_;
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);
  std::string backend_name_ ABSL_GUARDED_BY(mu_);
  int64_t steps_run_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StepExecutor>> StepExecutor::Create(Options options) {
  if (!options.connect) {
    return absl::InvalidArgumentError("StepExecutor: options.connect is not set");
  }
  auto executor = std::make_unique<StepExecutorImpl>(std::move(options));
  RETURN_IF_ERROR(executor->Init());
  return std::unique_ptr<StepExecutor>(std::move(executor));
}


}  // namespace shardps
