#include "python/ext/evaluator.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "common/tf_config.h"
#include "coordinator/job_spec.h"
#include "evaluator/eval_gauges.h"
#include "evaluator/eval_loop.h"
#include "evaluator/job_follower.h"
#include "evaluator/metrics_file.h"
#include "evaluator/ps_snapshot.h"
#include "evaluator/rpc/grpc_chief_link.h"
#include "grpcpp/grpcpp.h"
#include "model/external/external_model.h"
#include "observability/summary_writer.h"
#include "python/ext/arrays.h"
#include "python/ext/call.h"
#include "python/ext/errors.h"
#include "python/ext/external_job.h"
#include "python/ext/metrics_port.h"
#include "rpc/grpc_util.h"
#include "rpc/health_service.h"
#include "rpc/tls.h"

namespace shardps {
namespace python {
namespace {

namespace py = pybind11;

// One evaluation the follower asked for, waiting for Python, then its metrics.
struct EvalTicket {
  JobStatus status;
  bool final = false;
  int max_attempts = 1;
  std::shared_ptr<PsClient> ps;  // the Python side's client of the job's ps tasks
  absl::Notification done;
  absl::StatusOr<EvalMetrics> result;  // written once, before `done` is notified
  bool consistent = false;

  bool Finish(absl::StatusOr<EvalMetrics> r, bool was_consistent) {
    {
      absl::MutexLock lock(&mu);
      if (finished) return false;
      finished = true;
    }
    result = std::move(r);
    consistent = was_consistent;
    done.Notify();
    return true;
  }
  // Python reads the ps between Acquire and Release; the follower, once the ticket is
  // finished, waits for it to stop (WaitIdle) before it lets the client go.
  bool Acquire() {
    absl::MutexLock lock(&mu);
    if (finished) return false;
    ++in_use;
    return true;
  }
  void Release() {
    absl::MutexLock lock(&mu);
    --in_use;
  }
  void WaitIdle() {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &in_use));
  }

 private:
  absl::Mutex mu;
  bool finished ABSL_GUARDED_BY(mu) = false;
  int in_use ABSL_GUARDED_BY(mu) = 0;
};

// Evaluations handed from the follower's thread to Python.
class EvalQueue {
 public:
  // UNAVAILABLE once stopped.
  absl::Status Push(std::shared_ptr<EvalTicket> ticket) {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::UnavailableError("the evaluator is stopping");
    queue_.push_back(std::move(ticket));
    return absl::OkStatus();
  }
  std::shared_ptr<EvalTicket> Next(absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !queue_.empty() || stopped_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
    if (queue_.empty()) return nullptr;
    std::shared_ptr<EvalTicket> ticket = queue_.front();
    queue_.pop_front();
    handed_out_ = ticket;
    return ticket;
  }
  // Queued tickets and the one Python holds fail; Next returns at once.
  void Stop(const std::string& reason) {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
    for (const std::shared_ptr<EvalTicket>& t : queue_) {
      t->Finish(absl::UnavailableError(absl::StrCat("the evaluator stopped: ", reason)), false);
    }
    queue_.clear();
    if (std::shared_ptr<EvalTicket> t = handed_out_.lock()) {
      t->Finish(absl::UnavailableError(absl::StrCat("the evaluator stopped: ", reason)), false);
    }
  }
  bool stopped() {
    absl::MutexLock lock(&mu_);
    return stopped_;
  }

 private:
  absl::Mutex mu_;
  std::deque<std::shared_ptr<EvalTicket>> queue_ ABSL_GUARDED_BY(mu_);
  std::weak_ptr<EvalTicket> handed_out_ ABSL_GUARDED_BY(mu_);  // the follower waits for one
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

// The follower's evaluator of an external job: each evaluation is Python's.
class PythonLiveEvaluator final : public LiveEvaluator {
 public:
  PythonLiveEvaluator(EvalQueue* queue, JobSpec job, std::vector<std::string> ps_addresses,
                      PsClient::Options options)
      : queue_(*queue),
        job_(std::move(job)),
        ps_addresses_(std::move(ps_addresses)),
        options_(options) {}

  // Python reads through a client of its own (shared with the tickets), made anew with each
  // connection of the follower's, so both see the same layout.
  absl::Status Check(PsClient* ps) override {
    const std::string what = absl::StrCat("evaluator of job \"", job_.job_id(), "\"");
    RETURN_IF_ERROR(Annotate(ps->Discover(), what));
    RETURN_IF_ERROR(CheckDeclaredVariables(job_, ps, what));
    ASSIGN_OR_RETURN(std::unique_ptr<PsClient> own, NewGrpcPsClient(ps_addresses_, options_));
    RETURN_IF_ERROR(Annotate(own->Discover(), what));
    own_ = std::move(own);
    return absl::OkStatus();
  }

  absl::StatusOr<EvalMetrics> Evaluate(PsClient* /*ps*/, const JobStatus& status, bool final,
                                       int max_pull_attempts, bool* consistent) override {
    auto ticket = std::make_shared<EvalTicket>();
    ticket->status = status;
    ticket->final = final;
    ticket->max_attempts = max_pull_attempts;
    ticket->ps = own_;
    RETURN_IF_ERROR(queue_.Push(ticket));
    ticket->done.WaitForNotification();
    ticket->WaitIdle();
    *consistent = ticket->consistent;
    return ticket->result;
  }

 private:
  EvalQueue& queue_;
  const JobSpec job_;
  const std::vector<std::string> ps_addresses_;
  const PsClient::Options options_;
  std::shared_ptr<PsClient> own_;
};

// An evaluation as Python sees it (shardps.EvalState wraps it).
class PyEvalState {
 public:
  explicit PyEvalState(std::shared_ptr<EvalTicket> ticket) : ticket_(std::move(ticket)) {}

  const JobStatus& status() const { return ticket_->status; }
  bool final() const { return ticket_->final; }
  bool finished() const { return ticket_->done.HasBeenNotified(); }

  // A consistent read of `dense` (full names, whole) and `rows` (full name -> int64 ids):
  // (name -> array, min version, max version, consistent).
  py::tuple Pull(const std::vector<std::string>& dense, const py::dict& rows) {
    std::vector<PullTarget> targets;
    std::vector<RowsPullTarget> row_targets;
    std::vector<std::vector<float>> buffers(dense.size() + rows.size());
    std::vector<std::vector<int64_t>> shapes(buffers.size());
    std::vector<std::string> names;
    PsClient& ps = *ticket_->ps;
    for (const std::string& name : dense) {
      const VariableLayout layout = ValueOrThrow(ps.GetLayout(name));
      const size_t i = names.size();
      buffers[i].resize(layout.num_elements);
      shapes[i] = layout.shape;
      names.push_back(name);
      targets.push_back({name, absl::MakeSpan(buffers[i])});
    }
    for (const auto& [key, value] : rows) {
      const std::string name = py::cast<std::string>(key);
      const VariableLayout layout = ValueOrThrow(ps.GetLayout(name));
      absl::Span<const int64_t> ids = ValueOrThrow(IdsIn(value, absl::StrCat("rows[", name, "]")));
      const size_t i = names.size();
      buffers[i].resize(ids.size() * layout.row_width);
      shapes[i] = {static_cast<int64_t>(ids.size()), layout.row_width};
      names.push_back(name);
      row_targets.push_back({name, ids, absl::MakeSpan(buffers[i])});
    }
    if (!ticket_->Acquire()) {
      ThrowStatus(absl::FailedPreconditionError(
          "this evaluation has ended (reported, failed or the evaluator stopped)"));
    }
    bool consistent = false;
    absl::StatusOr<PullVersions> versions = WithoutGil([&] {
      return PullConsistent(&ps, targets, row_targets, ticket_->max_attempts, &consistent);
    });
    ticket_->Release();
    const PullVersions v = ValueOrThrow(std::move(versions));
    py::dict out;
    for (size_t i = 0; i < names.size(); ++i) {
      out[py::str(names[i])] = OwningArray(std::move(buffers[i]), shapes[i]);
    }
    version_ = v.min_version;
    consistent_ = consistent;
    return py::make_tuple(out, v.min_version, v.max_version, consistent);
  }

  // Returns whether the result was taken (false: the evaluation had ended already).
  bool Report(double loss, double accuracy, int64_t examples, double auc) {
    if (version_ < 0) {
      ThrowStatus(absl::FailedPreconditionError(
          "report before pull: an evaluation reports the parameters it pulled"));
    }
    EvalMetrics metrics;
    metrics.set_step(version_);
    metrics.set_loss(loss);
    metrics.set_accuracy(accuracy);
    metrics.set_examples(examples);
    metrics.set_auc(auc);
    metrics.set_unix_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
    return ticket_->Finish(metrics, consistent_);
  }

  bool Fail(const std::string& message) {
    return ticket_->Finish(absl::InternalError(absl::StrCat("the Python evaluation failed: ",
                                                            message)),
                           false);
  }

 private:
  const std::shared_ptr<EvalTicket> ticket_;
  int64_t version_ = -1;
  bool consistent_ = false;
};

class PyEvaluator {
 public:
  PyEvaluator(const std::string& tf_config, double rpc_timeout_s,
              const std::string& metrics_file, int metrics_port,
              const std::string& tensorboard_dir) {
    const TfConfig config = ValueOrThrow(LoadTfConfig(tf_config, std::getenv("TF_CONFIG")));
    if (config.task_type != "evaluator") {
      ThrowStatus(absl::InvalidArgumentError(absl::StrCat(
          "TF_CONFIG: task.type: shardps.Evaluator is an \"evaluator\" task, not \"",
          config.task_type, "\"")));
    }
    const std::string chief = ValueOrThrow(config.Address("chief", 0));
    ps_addresses_ = config.Tasks("ps");
    client_options_.rpc_timeout = absl::Seconds(rpc_timeout_s);
    if (!metrics_file.empty()) metrics_ = ValueOrThrow(MetricsFile::Open(metrics_file));
    // Its Prometheus gauges and TensorBoard series, as the evaluator daemon writes them.
    metrics_port_ = std::make_unique<MetricsPort>(config, metrics_port, "shardps.Evaluator");
    gauges_ = ValueOrThrow(EvalGauges::Create(metrics_port_->registry()));
    if (!tensorboard_dir.empty()) tensorboard_ = std::make_unique<SummaryWriter>(tensorboard_dir);
    chief_ = NewGrpcChiefLink(chief);
    ServeHealth(config);

    options_.chief = chief_.get();
    // The job's ps as the chief reports them (num_ps, a scale), else TF_CONFIG's.
    options_.connect_ps = [this](const std::vector<std::string>& job) {
      return NewGrpcPsClient(job.empty() ? ps_addresses_ : job, client_options_);
    };
    options_.new_evaluator =
        [this](const JobSpec& job) -> absl::StatusOr<std::unique_ptr<LiveEvaluator>> {
      if (job.model() != kExternalModel) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job \"", job.job_id(), "\": shardps.Evaluator evaluates jobs of model \"external\""
            " only, not \"", job.model(), "\" (the evaluator daemon does)"));
      }
      return std::make_unique<PythonLiveEvaluator>(&queue_, job, ps_addresses_,
                                                   client_options_);
    };
    hooks_.sleep = [this](absl::Duration timeout) {
      return stop_.WaitForNotificationWithTimeout(timeout);
    };
    hooks_.on_eval = [this](const EvalRecord& record) {
      if (metrics_ != nullptr) metrics_->Append(record).IgnoreError();  // logged by a reader
      gauges_->Record(record);
      if (tensorboard_ != nullptr) {
        tensorboard_->Write(record.metrics.steps_done(), EvalScalars(record));
      }
    };
    thread_ = std::thread([this] {
      const EvalOutcome outcome = FollowChiefJobs(options_, hooks_);
      {
        absl::MutexLock lock(&mu_);
        outcome_ = outcome == EvalOutcome::kSucceeded   ? "succeeded"
                   : outcome == EvalOutcome::kJobFailed ? "job_failed"
                                                        : "stopped";
      }
      queue_.Stop(absl::StrCat("the job ended (", outcome_name(), ")"));
    });
  }

  ~PyEvaluator() { Close(); }

  void Close() {
    if (!thread_.joinable()) return;
    stop_.Notify();
    queue_.Stop("the evaluator closed");
    WithoutGil([&] {
      thread_.join();
      if (health_server_ != nullptr) {
        health_server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
      }
      return 0;
    });
  }

  // The next evaluation, or None once the job has ended or the evaluator closed. Waits with
  // the GIL released, honouring Ctrl-C.
  py::object Next(double timeout_s) {
    std::shared_ptr<EvalTicket> ticket = NextOrNull(
        timeout_s, [&](absl::Duration slice) { return queue_.Next(slice); },
        [&] { return queue_.stopped(); });
    if (ticket == nullptr) return py::none();
    return py::cast(PyEvalState(std::move(ticket)));
  }


  // The evaluator daemon's health answer at the task's address, when TF_CONFIG lists one
  // (Kubernetes' probes); an evaluator outside the cluster listens nowhere.
  void ServeHealth(const TfConfig& config) {
    if (config.TaskAddress().empty()) return;
    const std::string listen = ValueOrThrow(ListenAddress(config.TaskAddress(), ""));
    ThrowIfError(CheckBinding(listen, ProcessTls()));
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort(listen, ServerCredentialsFor(ProcessTls()), &port);
    builder.RegisterService(&health_);
    health_server_ = builder.BuildAndStart();
    if (health_server_ == nullptr || port == 0) {
      ThrowStatus(absl::UnavailableError(
          absl::StrCat("shardps.Evaluator: cannot listen on ", listen, " (port in use?)")));
    }
  }

  // "running" until the followed job ends: then "succeeded" (its final model evaluated),
  // "job_failed" (failed or cancelled) or "stopped" (closed).
  const std::string& metrics_url() const { return metrics_port_->url(); }
  std::string outcome_name() {
    absl::MutexLock lock(&mu_);
    return outcome_;
  }

 private:
  std::vector<std::string> ps_addresses_;
  PsClient::Options client_options_;
  std::unique_ptr<MetricsFile> metrics_;
  std::unique_ptr<MetricsPort> metrics_port_;
  std::unique_ptr<EvalGauges> gauges_;
  std::unique_ptr<SummaryWriter> tensorboard_;  // null without a tensorboard_dir
  std::unique_ptr<ChiefLink> chief_;
  EvalQueue queue_;
  JobFollowerOptions options_;
  EvalLoopHooks hooks_;
  absl::Notification stop_;
  absl::Mutex mu_;
  std::string outcome_ ABSL_GUARDED_BY(mu_) = "running";
  HealthOnlyService health_;
  std::unique_ptr<grpc::Server> health_server_;
  std::thread thread_;
};

}  // namespace

void DefineEvaluator(py::module_& m) {
  py::class_<PyEvalState>(m, "_EvalState")
      .def_property_readonly("job_id", [](const PyEvalState& s) { return s.status().job_id(); })
      .def_property_readonly("job_json",
                             [](const PyEvalState& s) { return JobSpecToJson(s.status().job()); })
      .def_property_readonly("final", &PyEvalState::final)
      .def_property_readonly("steps_done",
                             [](const PyEvalState& s) { return s.status().steps_done(); })
      .def_property_readonly("elapsed_s",
                             [](const PyEvalState& s) { return s.status().elapsed_s(); })
      .def_property_readonly("finished", &PyEvalState::finished)
      .def("pull", &PyEvalState::Pull, py::arg("dense"), py::arg("rows"))
      .def("report", &PyEvalState::Report, py::arg("loss"), py::arg("accuracy"),
           py::arg("examples"), py::arg("auc"))
      .def("fail", &PyEvalState::Fail, py::arg("message"));

  py::class_<PyEvaluator>(m, "_Evaluator")
      .def(py::init<const std::string&, double, const std::string&, int, const std::string&>(),
           py::arg("tf_config"),
           py::arg("rpc_timeout"), py::arg("metrics_file"), py::arg("metrics_port"),
           py::arg("tensorboard_dir"))
      .def_property_readonly("metrics_url",
                             [](const PyEvaluator& e) { return e.metrics_url(); })
      .def("next", &PyEvaluator::Next, py::arg("timeout"))
      .def("close", &PyEvaluator::Close)
      .def_property_readonly("outcome", &PyEvaluator::outcome_name);
}

}  // namespace python
}  // namespace shardps
