// The chief daemon: the job's coordinator. Serves CoordinatorService at its TF_CONFIG
// address; runs the job given by --job (a JSON file) at once, or one submitted by shardctl.
//
// Durable state: with a checkpoint directory (job file field "checkpoint.dir", or
// --checkpoint_dir when the job file names none) the chief records the job's identity,
// checkpoints it, and on a restart resumes it: from the ps tasks' live state when they kept
// it, else from the newest usable checkpoint (--resume insists on resuming, --fresh starts
// over). A job that had finished is reported finished and not trained again.
//
// When the job ends (and the evaluator, if any, has reported its final evaluation), it tells
// every worker and ps to shut down and exits: 0 if the job succeeded, 4 if it failed or was
// cancelled; 2 for a bad command line, configuration or job file; 5 when SIGTERM/SIGINT
// interrupted a running job (after checkpointing it: a supervisor restarts the chief, which
// resumes; the ps and workers stay up). With --long_lived it keeps serving and accepts the
// next job instead.
//
// With --tensorboard_dir it writes the training series there as TensorBoard event files
// (coordinator/training_summary.h), from the status it polls.
//
// Without --job, a chief whose --checkpoint_dir records a job that neither finished nor
// ended (a chief restarted by its supervisor after a SIGTERM, say) resumes that job as if it
// were given its job file, and logs so; a job that ended is not resumed.
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/ps_client.h"
#include "common/error_detail.h"
#include "common/flags.h"
#include "common/log.h"
#include "coordinator/chief.h"
#include "coordinator/chief_metrics.h"
#include "coordinator/chief_options.h"
#include "coordinator/job_spec.h"
#include "coordinator/job_store.h"
#include "coordinator/rpc/grpc_coordinator_service.h"
#include "coordinator/rpc/grpc_worker_interface.h"
#include "coordinator/training_summary.h"
#include "observability/summary_writer.h"
#include "rpc/daemon.h"
#include "rpc/daemon_run.h"

namespace shardps {
namespace {

// The Chief and its service. Run starts the --job (if any) and follows the jobs until the
// one to stop at ends or the daemon is stopped.
class ChiefBody : public DaemonBody {
 public:
  ChiefBody(const ChiefOptions& options, const TfConfig& config, std::string job_json,
            std::unique_ptr<PsClient> ps, std::unique_ptr<Chief> chief)
      : options_(options),
        cluster_(absl::StrCat(" (", config.NumTasks("ps"), " ps, ", config.NumTasks("worker"),
                              " workers)")),
        job_json_(std::move(job_json)),
        ps_(std::move(ps)),
        chief_(std::move(chief)),
        service_(NewGrpcCoordinatorService(chief_.get())) {
    if (!options_.tensorboard_dir.empty()) {
      summary_ = std::make_unique<TrainingSummary>(
          std::make_unique<SummaryWriter>(options_.tensorboard_dir), absl::Seconds(1));
    }
  }

  std::vector<grpc::Service*> Services() override { return {service_.get()}; }
  std::string Describe() const override { return cluster_; }
  int Run(Daemon& daemon) override {
    std::string job_json = job_json_;
    if (job_json.empty() && !options_.checkpoint_dir.empty()) job_json = RecordedJob();
    if (!job_json.empty()) {
      if (std::optional<int> ended = StartJob(daemon, job_json)) return *ended;
    }
    return FollowJobs(daemon);
  }

 private:
  // Waits for every ps to answer, then submits `job_json`. An exit code when that failed or the
  // daemon was stopped meanwhile.
  // The job file of the unfinished job recorded in --checkpoint_dir; "" when there is none
  // (or it cannot be read: logged, and the chief waits for a submitted job).
  std::string RecordedJob() const {
    absl::StatusOr<std::optional<JobStore::Identity>> found =
        JobStore::UnfinishedJob(options_.checkpoint_dir);
    if (!found.ok()) {
      LogWarning() << "--checkpoint_dir: no job resumed: " << found.status().message();
      return "";
    }
    if (!found->has_value()) {
      LogInfo() << "no --job and no unfinished job in " << options_.checkpoint_dir
                << "; waiting for a submitted job";
      return "";
    }
    LogInfo() << "no --job: resuming job " << (*found)->job_id << ", unfinished in "
              << options_.checkpoint_dir;
    return JobSpecToJson((*found)->job);
  }

  std::optional<int> StartJob(Daemon& daemon, const std::string& job_json) {
    // The ps tasks may still be starting (or restarting): wait for them before the job.
    const absl::Time deadline = absl::Now() + absl::Seconds(options_.ps_wait_s);
    std::vector<HealthResponse> health;
    absl::Status ps_health;
    // A ps of another protocol version is no ps that is starting: say so at once.
    while (!(ps_health = ps_->Health(&health)).ok() && absl::Now() < deadline &&
           DetailKind(ps_health) != ErrorDetail::PROTOCOL_MISMATCH && !daemon.stop_requested()) {
      daemon.WaitForStopWithTimeout(absl::Milliseconds(500));
    }
    if (daemon.stop_requested()) return kExitInterrupted;
    if (DetailKind(ps_health) == ErrorDetail::PROTOCOL_MISMATCH) {
      LogError() << ps_health.message();
      return kExitError;
    }
    if (!ps_health.ok()) {
      LogError() << "ps tasks unreachable for " << options_.ps_wait_s
                 << " s: " << ps_health.message();
      return kExitError;
    }
    absl::StatusOr<SubmitJobResponse> submitted = chief_->Submit(job_json, options_.resume_mode());
    if (!submitted.ok()) {
      LogError() << submitted.status().message();
      // A job file that does not parse, or names paths outside --data_root: a restart
      // cannot fix it.
      const absl::StatusCode code = submitted.status().code();
      return code == absl::StatusCode::kInvalidArgument ||
                     code == absl::StatusCode::kPermissionDenied
                 ? kExitBadConfig
                 : kExitError;
    }
    if (submitted->already_finished()) {
      LogInfo() << "job " << submitted->job_id() << " had already finished ("
                << submitted->resumed_from() << "); nothing to train";
    } else {
      LogInfo() << "job " << submitted->job_id() << " started, " << submitted->total_steps()
                << " steps"
                << (submitted->resumed_from().empty()
                        ? std::string()
                        : absl::StrCat(", resumed at step ", submitted->resumed_at_step(),
                                       " from ", submitted->resumed_from()));
    }
    return std::nullopt;
  }

  // Until the daemon is stopped, or a job ends (without --long_lived: the cluster is then
  // shut down). The exit code: the last job's outcome, or 5 for a job interrupted mid-way.
  int FollowJobs(Daemon& daemon) {
    int exit_code = kExitDone;
    while (true) {
      if (daemon.stop_requested()) {
        // SIGTERM / SIGINT (a Shutdown RPC does not reach a chief): eviction or Ctrl-C.
        if (chief_->Interrupt(absl::Seconds(options_.interrupt_timeout_s))) {
          LogInfo() << "interrupted while the job ran; exiting 5 so that a supervisor "
                       "restarts the chief, which resumes the job";
          return kExitInterrupted;
        }
        return exit_code;
      }
      JobStatus status = chief_->Status();
      if (summary_ != nullptr) summary_->Observe(status, absl::Now());
      if (status.state() == JobStatus::NO_JOB || status.state() == JobStatus::RUNNING ||
          !chief_->WaitForJobEnd(absl::ZeroDuration())) {
        daemon.WaitForStopWithTimeout(absl::Milliseconds(200));
        continue;
      }
      // With where the recent steps' time went on their workers (benchmarks read it).
      LogInfo() << "job " << status.job_id() << " " << JobStatus::State_Name(status.state())
                << " after " << status.steps_done() << " steps"
                << (status.error().empty() ? "" : ": ") << status.error()
                << absl::StrFormat(" (recent steps on their workers: pull %.2f ms, compute "
                                   "%.2f ms, push %.2f ms)",
                                   status.pull_ms(), status.compute_ms(), status.push_ms());
      exit_code = status.state() == JobStatus::SUCCEEDED ? kExitDone : kExitJobFailed;
      if (daemon.long_lived()) {
        // Keep the cluster; wait for the next job.
        while (!daemon.stop_requested() && chief_->Status().job_id() == status.job_id()) {
          daemon.WaitForStopWithTimeout(absl::Milliseconds(200));
        }
        continue;
      }
      // Give the CLI a moment to read the final status, then stop the cluster.
      absl::SleepFor(absl::Seconds(1));
      chief_->ShutdownCluster(absl::StrCat("job ", status.job_id(), " ended"));
      return exit_code;
    }
  }

  const ChiefOptions options_;
  const std::string cluster_;  // " (2 ps, 2 workers)"
  const std::string job_json_;
  // Destroyed in reverse order: the service, the chief, then the ps client it uses.
  std::unique_ptr<PsClient> ps_;
  std::unique_ptr<Chief> chief_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<TrainingSummary> summary_;  // null without --tensorboard_dir
};

// The job file's text; INVALID_ARGUMENT naming --job when it cannot be read.
absl::StatusOr<std::string> ReadJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::InvalidArgumentError(absl::StrCat("--job: cannot read \"", path, "\""));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Main(int argc, char** argv) {
  FlagParser flags("chief",
                   "shardps chief (coordinator) daemon; the cluster comes from TF_CONFIG.");
  Daemon daemon("chief", &flags);
  ChiefOptions options;
  options.AddFlags(&flags);
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
  if (absl::Status valid = options.Validate(); !valid.ok()) return ExitBadConfig(valid.message());
  std::string job_json;
  if (!options.job_file.empty()) {
    absl::StatusOr<std::string> read = ReadJobFile(options.job_file);
    if (!read.ok()) return ExitBadConfig(read.status().message());
    job_json = *std::move(read);
  }

  const TfConfig& config = daemon.config();
  absl::StatusOr<std::unique_ptr<PsClient>> ps =
      NewGrpcPsClient(config.Tasks("ps"), PsClient::Options());
  if (!ps.ok()) {
    LogError() << ps.status();
    return kExitError;
  }
  Chief::Options chief_options;
  chief_options.ps_addresses = config.Tasks("ps");
  for (const std::string& address : config.Tasks("worker")) {
    chief_options.workers.push_back(NewGrpcWorkerInterface(address));
  }
  // Workers TF_CONFIG does not name join by announcing themselves (docs/elastic.md).
  chief_options.connect_worker = [](const std::string& address) {
    return NewGrpcWorkerInterface(address);
  };
  chief_options.long_lived = daemon.long_lived();
  chief_options.ps = ps->get();
  // Other ps sets: a job's num_ps, its journal's layout, shardctl scale-ps (docs/elastic.md).
  chief_options.connect_ps = [](const std::vector<std::string>& addresses)
      -> absl::StatusOr<std::shared_ptr<PsClient>> {
    absl::StatusOr<std::unique_ptr<PsClient>> client =
        NewGrpcPsClient(addresses, PsClient::Options());
    if (!client.ok()) return client.status();
    return std::shared_ptr<PsClient>(*std::move(client));
  };
  chief_options.has_evaluator = options.has_evaluator(config);
  chief_options.final_eval_timeout = absl::Seconds(options.final_eval_timeout_s);
  chief_options.data_root = daemon.data_root();
  if (!options.checkpoint_dir.empty()) {
    absl::StatusOr<std::string> dir =
        daemon.data_root().Resolve(options.checkpoint_dir, "--checkpoint_dir");
    if (!dir.ok()) return ExitBadConfig(dir.status().message());
  }
  chief_options.default_checkpoint_dir = options.checkpoint_dir;
  chief_options.default_checkpoint_every = options.checkpoint_every();
  absl::StatusOr<std::unique_ptr<Chief>> chief = Chief::Create(std::move(chief_options));
  if (!chief.ok()) return ExitBadConfig(chief.status().message());
  Chief* chief_ptr = chief->get();
  ChiefBody body(options, config, std::move(job_json), *std::move(ps), *std::move(chief));
  if (daemon.metrics_enabled()) {
    absl::Status added =
        AddChiefMetrics(daemon.metrics(), [chief_ptr] { return chief_ptr->Status(); });
    if (!added.ok()) LogError() << added.message();
  }
  return RunDaemon(daemon, body);
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
