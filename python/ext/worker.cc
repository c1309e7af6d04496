#include "python/ext/worker.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/grpc_chief_interface.h"
#include "client/ps_client.h"
#include "coordinator/job_spec.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "common/tf_config.h"
#include "data/batcher.h"
#include "google/protobuf/util/message_differencer.h"
#include "grpcpp/grpcpp.h"
#include "model/external/external_model.h"
#include "proto/error.pb.h"
#include "python/ext/arrays.h"
#include "python/ext/call.h"
#include "python/ext/client.h"
#include "python/ext/errors.h"
#include "python/ext/external_job.h"
#include "python/ext/metrics_port.h"
#include "rpc/executor.h"
#include "rpc/grpc_util.h"
#include "rpc/tls.h"
#include "worker/rpc/grpc_worker_service.h"
#include "worker/chief_membership.h"
#include "worker/metered_steps.h"
#include "worker/step_executor.h"

namespace shardps {
namespace python {
namespace {

namespace py = pybind11;

constexpr char kBackendName[] = "python (shardps.Worker)";
// Beyond the job's step timeout, how long RunStep waits for Python before it gives the step up.
constexpr absl::Duration kStepWaitSlack = absl::Seconds(5);

// The job this worker runs: its spec, a client of its ps tasks and its batches.
struct Job {
  JobSpec spec;
  std::vector<std::string> ps_addresses;
  std::shared_ptr<PsClient> ps;
  std::unique_ptr<Batcher> batcher;
};

// A step the chief leased, waiting for Python, then its result.
struct Ticket {
  StepRequest request;
  std::shared_ptr<Job> job;
  absl::Notification done;
  absl::StatusOr<StepResponse> result;  // written once, before `done` is notified

  // Sets the result, the first time only (Python's, or the give-up of a RunStep that waited
  // too long, or the worker's stop); returns whether this call set it.
  bool Finish(absl::StatusOr<StepResponse> r) {
    {
      absl::MutexLock lock(&mu);
      if (finished) return false;
      finished = true;
    }
    result = std::move(r);
    done.Notify();
    return true;
  }

 private:
  absl::Mutex mu;
  bool finished ABSL_GUARDED_BY(mu) = false;
};

class ExternalStepExecutor final : public StepExecutor {
 public:
  ExternalStepExecutor(int task_index, PsClient::Options client_options)
      : task_index_(task_index), client_options_(client_options) {}

  absl::StatusOr<StartJobResponse> StartJob(const StartJobRequest& request) override {
    const JobSpec& spec = request.job();
    const std::vector<std::string> addresses(request.ps_addresses().begin(),
                                             request.ps_addresses().end());
    StartJobResponse response;
    response.set_backend(kBackendName);
    {
      absl::MutexLock lock(&mu_);
      if (job_ != nullptr && job_->ps_addresses == addresses &&
          google::protobuf::util::MessageDifferencer::Equals(job_->spec, spec)) {
        return response;
      }
    }
    const std::string what = absl::StrCat("job \"", spec.job_id(), "\"");
    if (spec.model() != kExternalModel) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": shardps.Worker runs jobs of model \"external\" only, not \"", spec.model(),
          "\" (a C++ worker daemon runs that)"));
    }
    if (spec.batch_size() <= 0 || spec.examples_per_epoch() <= 0 || addresses.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": needs batch_size, examples_per_epoch and ps addresses"));
    }
    auto job = std::make_shared<Job>();
    job->spec = spec;
    job->ps_addresses = addresses;
    absl::StatusOr<std::unique_ptr<PsClient>> ps = NewGrpcPsClient(addresses, client_options_);
    if (!ps.ok()) return Annotate(ps.status(), what);
    job->ps = *std::move(ps);
    RETURN_IF_ERROR(
        Annotate(job->ps->Discover(), absl::StrCat(what, ": listing the ps tasks' variables")));
    RETURN_IF_ERROR(CheckDeclaredVariables(job->spec, job->ps.get(), what));
    job->batcher = std::make_unique<Batcher>(spec.examples_per_epoch(), spec.seed());
    absl::MutexLock lock(&mu_);
    job_ = std::move(job);
    return response;
  }

  absl::StatusOr<StepResponse> RunStep(const StepRequest& request) override {
    auto ticket = std::make_shared<Ticket>();
    ticket->request = request;
    absl::Duration wait;
    {
      absl::MutexLock lock(&mu_);
      if (job_ == nullptr || job_->spec.job_id() != request.job_id()) {
        return WithDetail(absl::FailedPreconditionError(absl::StrCat(
                              "this worker does not run job \"", request.job_id(), "\"")),
                          ErrorDetail::UNKNOWN_JOB);
      }
      if (stopped_) return absl::UnavailableError("the worker is stopping");
      ticket->job = job_;
      queue_.push_back(ticket);
      wait = absl::Milliseconds(job_->spec.step_timeout_ms()) + kStepWaitSlack;
    }
    if (!ticket->done.WaitForNotificationWithTimeout(wait)) {
      ticket->Finish(absl::DeadlineExceededError(absl::StrCat(
          "step ", request.step_id(), ": the Python code did not finish it in ",
          absl::FormatDuration(wait))));
    }
    if (ticket->result.ok()) {
      absl::MutexLock lock(&mu_);
      ++steps_run_;
    }
    return ticket->result;
  }

  WorkerStatusResponse Status() override {
    absl::MutexLock lock(&mu_);
    WorkerStatusResponse status;
    status.set_task_index(task_index_);
    status.set_backend(kBackendName);
    if (job_ != nullptr) status.set_job_id(job_->spec.job_id());
    status.set_steps_run(steps_run_);
    return status;
  }

  std::string BackendName() override { return kBackendName; }

  // The next step for Python: waits until one is leased, the worker stops, or `timeout`.
  std::shared_ptr<Ticket> Next(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || stopped_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (queue_.empty()) return nullptr;
    std::shared_ptr<Ticket> ticket = queue_.front();
    queue_.pop_front();
    handed_out_.erase(std::remove_if(handed_out_.begin(), handed_out_.end(),
                                     [](const std::weak_ptr<Ticket>& w) {
                                       std::shared_ptr<Ticket> t = w.lock();
                                       return t == nullptr || t->done.HasBeenNotified();
                                     }),
                      handed_out_.end());
    handed_out_.push_back(ticket);
    return ticket;
  }

  // No more steps: Next returns at once; steps still queued fail UNAVAILABLE.
  void Stop(const std::string& reason) {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    stop_reason_ = reason;
    for (const std::shared_ptr<Ticket>& t : queue_) {
      t->Finish(absl::UnavailableError(absl::StrCat("the worker stopped: ", reason)));
    }
    queue_.clear();
    // Steps Python still holds end too: nothing waits for them any more.
    for (const std::weak_ptr<Ticket>& weak : handed_out_) {
      if (std::shared_ptr<Ticket> t = weak.lock()) {
        t->Finish(absl::UnavailableError(absl::StrCat("the worker stopped: ", reason)));
      }
    }
    handed_out_.clear();
  }

  bool stopped() {
    absl::MutexLock lock(&mu_);
    return stopped_;
  }
  std::string stop_reason() {
    absl::MutexLock lock(&mu_);
    return stop_reason_;
  }
  std::shared_ptr<Job> job() {
    absl::MutexLock lock(&mu_);
    return job_;
  }

 private:
  static absl::Status Annotate(const absl::Status& s, const std::string& what) {
    return shardps::Annotate(s, what);
  }

  const int task_index_;
  const PsClient::Options client_options_;
  absl::Mutex mu_;
  std::shared_ptr<Job> job_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Ticket>> queue_ ABSL_GUARDED_BY(mu_);
  // Steps Next handed to Python (pruned as they finish).
  std::vector<std::weak_ptr<Ticket>> handed_out_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  std::string stop_reason_ ABSL_GUARDED_BY(mu_);
  int64_t steps_run_ ABSL_GUARDED_BY(mu_) = 0;
};

// A step as Python sees it (shardps.Step wraps it).
class PyStep {
 public:
  explicit PyStep(std::shared_ptr<Ticket> ticket) : ticket_(std::move(ticket)) {}

  const StepRequest& request() const { return ticket_->request; }
  const JobSpec& spec() const { return ticket_->job->spec; }
  uint64_t idempotency_key() const {
    return StepIdempotencyKey(request().job_id(), request().step_id(), request().generation());
  }
  py::object client() const { return WrapClient(ticket_->job->ps); }

  // The example indices of the step's batch (the same on every worker).
  py::array Indices() const {
    absl::StatusOr<std::vector<int64_t>> indices = ticket_->job->batcher->BatchIndices(
        request().epoch(), request().batch_index(), spec().batch_size());
    return OwningIds(ValueOrThrow(std::move(indices)));
  }

  bool finished() const { return ticket_->done.HasBeenNotified(); }
  // Why the step ended, once it has ("": it succeeded).
  std::string error() const {
    if (!finished() || ticket_->result.ok()) return "";
    return std::string(ticket_->result.status().message());
  }

  // Returns whether the result was taken (false: the step had ended already, given up by
  // the chief's side or the worker's stop).
  bool Succeed(double loss, int64_t correct, int64_t examples, int64_t version, double pull_ms,
               double compute_ms, double push_ms) {
    StepResponse response;
    response.set_loss(loss);
    response.set_correct(correct);
    response.set_examples(examples);
    response.set_version(version);
    response.set_pull_ms(pull_ms);
    response.set_compute_ms(compute_ms);
    response.set_push_ms(push_ms);
    return ticket_->Finish(response);
  }

  // A failed step, with the status code and typed detail of the shardps.Error that ended it
  // (code and kind by name; UNSPECIFIED for another exception), so the chief acts on a ps
  // failure behind it as on a C++ worker's.
  bool Fail(const std::string& code, const std::string& kind, const std::string& message,
            std::optional<int> ps_task, std::optional<int64_t> generation) {
    absl::StatusCode status_code = absl::StatusCode::kInternal;
    for (int c = 1; c <= 16; ++c) {
      if (absl::StatusCodeToString(static_cast<absl::StatusCode>(c)) == code) {
        status_code = static_cast<absl::StatusCode>(c);
      }
    }
    absl::Status status(status_code, absl::StrCat("step ", request().step_id(), " (epoch ",
                                                  request().epoch(), ", batch ",
                                                  request().batch_index(), "): ", message));
    // Always with a detail: it tells the chief that the worker answered (an INTERNAL error
    // without one reads as a worker that is down), so a failing step counts as an attempt.
    ErrorDetail::Kind detail_kind = ErrorDetail::UNSPECIFIED;
    if (!ErrorDetail::Kind_Parse(kind, &detail_kind)) detail_kind = ErrorDetail::UNSPECIFIED;
    ErrorDetail detail;
    detail.set_kind(detail_kind);
    detail.set_ps_task(ps_task.value_or(-1));
    if (generation.has_value()) detail.set_generation(*generation);
    return ticket_->Finish(WithDetail(status, detail));
  }

 private:
  const std::shared_ptr<Ticket> ticket_;
};

class PyWorker {
 public:
  PyWorker(const std::string& tf_config, double rpc_timeout_s, int metrics_port,
           double orphan_timeout_s)
      : orphan_timeout_(orphan_timeout_s > 0 ? absl::Seconds(orphan_timeout_s)
                                             : absl::ZeroDuration()) {
    TfConfig config = ValueOrThrow(LoadTfConfig(tf_config, std::getenv("TF_CONFIG")));
    if (config.task_type != "worker") {
      ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: task.type: shardps.Worker is a \"worker\" task, not \"", config.task_type,
          "\"",
          config.task_type == "evaluator"
              ? " (the job's evaluator runs shardps.Evaluator: pick the part by "
                "shardps.task(), or start the launcher with --no_evaluator)"
              : "")));
    }
    PsClient::Options options;
    options.rpc_timeout = absl::Seconds(rpc_timeout_s);
    auto executor = std::make_unique<ExternalStepExecutor>(config.task_index, options);
    executor_ = executor.get();
    // Counted as the worker daemon counts its steps (worker/metered_steps.h).
    metrics_ = std::make_unique<MetricsPort>(config, metrics_port, "shardps.Worker");
    steps_ = ValueOrThrow(NewMeteredStepExecutor(std::move(executor), metrics_->registry()));
    rpc_executor_ = std::make_unique<Executor>(2);
    WorkerServiceOptions service_options;
    ExternalStepExecutor* steps = executor_;
    service_options.on_shutdown = [steps](const std::string& reason) { steps->Stop(reason); };
    if (config.NumTasks("chief") > 0) {
      join_ = std::make_shared<JoinState>();
      // Each call of the chief, for StayJoined's silence.
      service_options.on_chief_call = [join = join_] {
        join->last_contact.store(absl::ToUnixMillis(absl::Now()), std::memory_order_relaxed);
      };
    }
    service_ = NewGrpcWorkerService(steps_.get(), rpc_executor_.get(), service_options);
    const std::string listen = ValueOrThrow(ListenAddress(config.TaskAddress(), ""));
    ThrowIfError(CheckBinding(listen, ProcessTls()));
    // grpc.health.v1 beside the worker service, as the daemons serve it (Kubernetes' probes).
    grpc::EnableDefaultHealthCheckService(true);
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort(listen, ServerCredentialsFor(ProcessTls()), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    if (server_ == nullptr || port == 0) {
      ThrowStatus(absl::UnavailableError(
          absl::StrCat("shardps.Worker: cannot listen on ", listen, " (port in use?)")));
    }
    address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", port);
    task_index_ = config.task_index;
    // Announce this worker to the chief, as the worker daemon does (elastic workers,
    // docs/elastic.md): a worker the chief's TF_CONFIG does not name joins its job.
    if (join_ != nullptr) {
      join_->chief = NewGrpcChiefInterface(config.Tasks("chief")[0]);
      // TF_CONFIG's address, where the chief reaches it (what it binds may be 0.0.0.0).
      join_->me = Membership::FromConfig(config);
      // The thread holds only the shared state: Close need not wait for a call in flight.
      std::thread([join = join_] {
        absl::StatusOr<JoinJobResponse> joined = JoinChief(
            join->chief.get(), join->me,
            [&join](absl::Duration d) { return join->stop.WaitForNotificationWithTimeout(d); });
        {
          absl::MutexLock lock(&join->mu);
          join->status = joined.status();
        }
        if (!joined.ok()) return;
        // A chief that restarted knows only its TF_CONFIG's workers.
        StayJoined(
            join->chief.get(), join->me,
            [&join] {
              return absl::FromUnixMillis(join->last_contact.load(std::memory_order_relaxed));
            },
            [&join](absl::Duration d) { return join->stop.WaitForNotificationWithTimeout(d); });
      }).detach();
    }
  }

  // Tells the chief this worker leaves (its steps in flight get up to `wait_s` to come back),
  // then stops: Next returns None. The number of leased steps the chief took back.
  int64_t Leave(double wait_s) {
    if (join_ == nullptr) {
      ThrowStatus(absl::FailedPreconditionError(
          "shardps.Worker.leave: TF_CONFIG names no chief to leave"));
    }
    absl::StatusOr<LeaveJobResponse> left = WithoutGil(
        [&] { return LeaveChief(join_->chief.get(), join_->me, absl::Seconds(wait_s)); });
    executor_->Stop("the worker left the job");
    return ValueOrThrow(std::move(left)).steps_handed_back();
  }

  // The chief's refusal of this worker, when it refused it (raised by Next).
  absl::Status refusal() {
    if (join_ == nullptr) return absl::OkStatus();
    absl::MutexLock lock(&join_->mu);
    if (join_->status.ok() || absl::IsCancelled(join_->status)) return absl::OkStatus();
    // Started after the job it was started for had ended (a slow start, a job that failed at
    // once): nothing to do, as the worker daemon exits 0 then. steps() ends without steps.
    if (JoinedTooLate(join_->status)) {
      executor_->Stop(absl::StrCat("the job had ended: ", join_->status.message()));
      return absl::OkStatus();
    }
    return absl::Status(join_->status.code(), absl::StrCat("the chief refused this worker: ",
                                                           join_->status.message()));
  }

  ~PyWorker() { Close(); }

  void Close() {
    if (server_ == nullptr) return;
    if (join_ != nullptr) join_->stop.Notify();
    executor_->Stop("the worker closed");
    WithoutGil([&] {
      server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(5)));
      server_.reset();
      rpc_executor_.reset();
      return 0;
    });
  }

  // The next step, or None once the job has ended (the chief's Shutdown) or the worker
  // closed. Waits with the GIL released, honouring Ctrl-C.
  py::object Next(double timeout_s) {
    std::shared_ptr<Ticket> ticket = NextOrNull(
        timeout_s, [&](absl::Duration slice) { return executor_->Next(slice); },
        [&] { return executor_->stopped() || !refusal().ok() || Orphaned(); });
    if (ticket == nullptr) {
      ThrowIfError(refusal());
      return py::none();
    }
    return py::cast(PyStep(std::move(ticket)));
  }


  bool stopped() { return executor_->stopped(); }
  std::string stop_reason() { return executor_->stop_reason(); }
  const std::string& address() const { return address_; }
  const std::string& metrics_url() const { return metrics_->url(); }
  int task_index() const { return task_index_; }
  // The job being run, as its job file (JobSpecToJson), or None before the first.
  py::object job_json() {
    std::shared_ptr<Job> job = executor_->job();
    if (job == nullptr) return py::none();
    return py::str(JobSpecToJson(job->spec));
  }

 private:
  // No call from the chief for orphan_timeout_ (the worker daemon's --orphan_timeout_s): the
  // job is gone; the worker stops (steps() ends) saying so. Never without a chief in TF_CONFIG
  // or with the timeout 0.
  bool Orphaned() {
    if (join_ == nullptr || orphan_timeout_ <= absl::ZeroDuration()) return false;
    const absl::Duration silent =
        absl::Now() - absl::FromUnixMillis(join_->last_contact.load(std::memory_order_relaxed));
    if (silent < orphan_timeout_) return false;
    executor_->Stop(absl::StrCat("orphaned: no call from the chief for ",
                                 absl::FormatDuration(orphan_timeout_),
                                 " (orphan_timeout): the job is gone"));
    return true;
  }

  const absl::Duration orphan_timeout_;
  // The announcement to the chief (JoinChief on a thread of its own); null when TF_CONFIG
  // names no chief.
  struct JoinState {
    std::unique_ptr<ChiefInterface> chief;
    Membership me;
    absl::Notification stop;
    absl::Mutex mu;
    absl::Status status ABSL_GUARDED_BY(mu) = absl::CancelledError("not joined yet");
    std::atomic<int64_t> last_contact{absl::ToUnixMillis(absl::Now())};  // the chief's, Unix ms
  };
  std::shared_ptr<JoinState> join_;
  std::unique_ptr<MetricsPort> metrics_;
  std::unique_ptr<StepExecutor> steps_;  // executor_, its steps counted into metrics_
  ExternalStepExecutor* executor_ = nullptr;
  std::unique_ptr<Executor> rpc_executor_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  int task_index_ = 0;
};

}  // namespace

void DefineWorker(py::module_& m) {
  m.def(
      "_batch_indices",
      [](int64_t examples, uint64_t seed, int64_t epoch, int64_t batch_index, int64_t batch_size) {
        Batcher batcher(examples, seed);
        return OwningIds(ValueOrThrow(batcher.BatchIndices(epoch, batch_index, batch_size)));
      },
      py::arg("examples"), py::arg("seed"), py::arg("epoch"), py::arg("batch_index"),
      py::arg("batch_size"));
  py::class_<PyStep>(m, "_Step")
      .def_property_readonly("job_id", [](const PyStep& s) { return s.request().job_id(); })
      .def_property_readonly("step_id", [](const PyStep& s) { return s.request().step_id(); })
      .def_property_readonly("epoch", [](const PyStep& s) { return s.request().epoch(); })
      .def_property_readonly("batch_index",
                             [](const PyStep& s) { return s.request().batch_index(); })
      .def_property_readonly("min_version",
                             [](const PyStep& s) { return s.request().min_version(); })
      .def_property_readonly("sync", [](const PyStep& s) { return s.request().sync(); })
      .def_property_readonly("sync_step", [](const PyStep& s) { return s.request().sync_step(); })
      .def_property_readonly("replica", [](const PyStep& s) { return s.request().replica(); })
      .def_property_readonly("generation",
                             [](const PyStep& s) { return s.request().generation(); })
      .def_property_readonly("idempotency_key", &PyStep::idempotency_key)
      .def_property_readonly("job_json", [](const PyStep& s) { return JobSpecToJson(s.spec()); })
      .def_property_readonly("finished", &PyStep::finished)
      .def_property_readonly("error", &PyStep::error)
      .def("client", &PyStep::client)
      .def("indices", &PyStep::Indices)
      .def("succeed", &PyStep::Succeed, py::arg("loss"), py::arg("correct"), py::arg("examples"),
           py::arg("version"), py::arg("pull_ms"), py::arg("compute_ms"), py::arg("push_ms"))
      .def("fail", &PyStep::Fail, py::arg("code"), py::arg("kind"), py::arg("message"),
           py::arg("ps_task"), py::arg("generation"));

  py::class_<PyWorker>(m, "_Worker")
      .def(py::init<const std::string&, double, int, double>(), py::arg("tf_config"),
           py::arg("rpc_timeout"), py::arg("metrics_port"), py::arg("orphan_timeout"))
      .def_property_readonly("metrics_url",
                             [](const PyWorker& w) { return w.metrics_url(); })
      .def("leave", &PyWorker::Leave, py::arg("wait_s"))
      .def("next", &PyWorker::Next, py::arg("timeout"))
      .def("close", &PyWorker::Close)
      .def_property_readonly("stopped", &PyWorker::stopped)
      .def_property_readonly("stop_reason", &PyWorker::stop_reason)
      .def_property_readonly("address", &PyWorker::address)
      .def_property_readonly("task_index", &PyWorker::task_index)
      .def("job_json", &PyWorker::job_json);
}

}  // namespace python
}  // namespace shardps
