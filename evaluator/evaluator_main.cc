// The evaluator daemon: measures the model on the test set while it trains. Two modes:
//
//   ps mode (the default): follows the chief's job (TF_CONFIG names the chief and the ps).
//     While the job trains it evaluates a consistent snapshot of the live parameters, every
//     eval_every_steps steps or as often as it can, and once training is done the final
//     model; it waits while the job is paused (recovering) and while the chief is
//     unreachable (a restarted chief resumes the job). evaluator/job_follower.h.
//       TF_CONFIG=... evaluator [--metrics_file=F] [--backend=cpu] [--threads=N]
//   sidecar mode (TensorFlow's SidecarEvaluator): evaluates each committed checkpoint in a
//     job's checkpoint directory once, from the files alone; TF_CONFIG is optional (with a
//     chief in it, each result is reported to the chief too). evaluator/sidecar.h.
//       evaluator --checkpoint_dir=DIR [--metrics_file=F] [--long_lived]
//
// Each evaluation is appended to --metrics_file as a JSON line (evaluator/metrics_file.h),
// and with --tensorboard_dir written there as TensorBoard event files too
// (docs/observability.md).
//
// Exit codes (rpc/daemon.h; docs/exit-codes.md): 0 after the final evaluation of a
// job that succeeded (sidecar: of the checkpoint marked final); 4 when the job failed or was
// cancelled (no final evaluation); 5 on SIGINT/SIGTERM; 6 after --orphan_timeout_s without
// an answer from the chief (sidecar: without an answer or a new checkpoint); 2 for a bad
// command line or configuration; 1 when it cannot start (no compute backend). --long_lived
// keeps it running after a job ends (ps mode: it follows the next job) and turns the orphan
// timeout off.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "common/log.h"
#include "compute/backend_kind.h"
#include "compute/compute_device.h"
#include "evaluator/eval_gauges.h"
#include "evaluator/eval_loop.h"
#include "evaluator/evaluator_options.h"
#include "evaluator/job_follower.h"
#include "evaluator/metrics_file.h"
#include "evaluator/rpc/grpc_chief_link.h"
#include "evaluator/sidecar.h"
#include "observability/summary_writer.h"
#include "rpc/daemon.h"
#include "rpc/daemon_run.h"

namespace shardps {
namespace {

// The evaluation loop of either mode, with what it uses. Serves no RPC of its own: its
// server, if any, answers health checks only.
class EvaluatorBody : public DaemonBody {
 public:
  // `gauges`: null without --metrics_port.
  EvaluatorBody(const EvaluatorOptions& options, const TfConfig* config,
                ComputeDevice device, std::unique_ptr<MetricsFile> metrics,
                std::unique_ptr<EvalGauges> gauges)
      : options_(options),
        device_(std::move(device)),
        metrics_(std::move(metrics)),
        gauges_(std::move(gauges)) {
    if (!options_.tensorboard_dir.empty()) {
      tensorboard_ = std::make_unique<SummaryWriter>(options_.tensorboard_dir);
    }
    if (config != nullptr) ps_addresses_ = config->Tasks("ps");
    if (HasChief(config)) {
      chief_address_ = config->Tasks("chief")[0];
      chief_ = NewGrpcChiefLink(chief_address_);
    }
  }

  std::string Describe() const override {
    return absl::StrCat(
        options_.sidecar() ? absl::StrCat(", sidecar of ", options_.checkpoint_dir) : ", ps mode",
        chief_ != nullptr ? absl::StrCat(", chief at ", chief_address_) : "", ", backend ",
        device_.Name(), ", metrics to ", options_.metrics_file,
        tensorboard_ != nullptr ? absl::StrCat(", TensorBoard to ", options_.tensorboard_dir)
                                : "");
  }

  int Run(Daemon& daemon) override {
    EvalLoopHooks hooks;
    hooks.sleep = [&daemon](absl::Duration timeout) {
      return daemon.WaitForStopWithTimeout(timeout);
    };
    hooks.on_contact = [&daemon] { daemon.NoteChiefContact(); };
    hooks.on_eval = [this](const EvalRecord& record) {
      absl::Status written = metrics_->Append(record);
      if (!written.ok()) LogError() << written;
      // A failure is said once by the writer; the evaluations go on.
      if (tensorboard_ != nullptr) {
        tensorboard_->Write(record.metrics.steps_done(), EvalScalars(record));
      }
      if (gauges_ != nullptr) gauges_->Record(record);
    };
    // The loops still name the evaluator in their lines; the log names it already.
    hooks.log = [](const std::string& line) {
      LogInfo() << absl::StripPrefix(line, "evaluator: ");
    };
    switch (options_.sidecar() ? RunSidecarMode(daemon, hooks) : FollowChief(daemon, hooks)) {
      case EvalOutcome::kSucceeded:
        return kExitDone;
      case EvalOutcome::kJobFailed:
        return kExitJobFailed;
      case EvalOutcome::kStopped:
        break;
    }
    return daemon.StopExitCode();
  }

 private:
  EvalOutcome RunSidecarMode(const Daemon& daemon, const EvalLoopHooks& hooks) {
    SidecarOptions sidecar;
    sidecar.checkpoint_dir = options_.checkpoint_dir;
    sidecar.device = &device_;
    sidecar.data_root = daemon.data_root();
    sidecar.chief = chief_.get();
    sidecar.long_lived = daemon.long_lived();
    sidecar.poll_interval = absl::Seconds(options_.poll_interval_s);
    return RunSidecar(sidecar, hooks);
  }

  EvalOutcome FollowChief(const Daemon& daemon, const EvalLoopHooks& hooks) {
    JobFollowerOptions follower;
    follower.chief = chief_.get();
    follower.device = &device_;
    follower.data_root = daemon.data_root();
    follower.long_lived = daemon.long_lived();
    // The job's ps as the chief reports them (a job on num_ps of them, or scaled), else
    // TF_CONFIG's.
    follower.connect_ps = [ps_addresses = ps_addresses_](const std::vector<std::string>& job) {
      return NewGrpcPsClient(job.empty() ? ps_addresses : job, PsClient::Options());
    };
    return FollowChiefJobs(follower, hooks);
  }

  const EvaluatorOptions options_;
  const ComputeDevice device_;  // where each job's model computes
  std::unique_ptr<MetricsFile> metrics_;
  std::unique_ptr<SummaryWriter> tensorboard_;  // null without --tensorboard_dir
  std::unique_ptr<EvalGauges> gauges_;
  std::vector<std::string> ps_addresses_;
  std::string chief_address_;
  std::unique_ptr<ChiefLink> chief_;
};

int Main(int argc, char** argv) {
  FlagParser flags("evaluator",
                   "shardps evaluator daemon: evaluates the chief's job on held-out data, live "
                   "from the ps (TF_CONFIG) or from its checkpoints (--checkpoint_dir).");
  Daemon daemon("evaluator", &flags);
  daemon.set_config_optional();
  EvaluatorOptions options;
  options.AddFlags(&flags);
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
  const TfConfig* config = daemon.has_config() ? &daemon.config() : nullptr;
  if (absl::Status valid = options.Validate(config); !valid.ok()) {
    return ExitBadConfig(valid.message());
  }
  if (options.sidecar()) {
    // Checkpoints are read from inside the data root only, as the chief writes them there.
    absl::StatusOr<std::string> dir =
        daemon.data_root().Resolve(options.checkpoint_dir, "--checkpoint_dir");
    if (!dir.ok()) return ExitBadConfig(dir.status().message());
    options.checkpoint_dir = *dir;
  }

  absl::StatusOr<ComputeDevice> device =
      ComputeDevice::Open(*ParseBackendKind(options.backend), static_cast<int>(options.threads));
  if (!device.ok()) {
    LogError() << device.status().message();
    return kExitError;
  }
  absl::StatusOr<std::unique_ptr<MetricsFile>> metrics = MetricsFile::Open(options.metrics_file);
  if (!metrics.ok()) return ExitBadConfig(absl::StrCat("--metrics_file: ", metrics.status().message()));
  std::unique_ptr<EvalGauges> gauges;
  if (daemon.metrics_enabled()) {
    absl::StatusOr<std::unique_ptr<EvalGauges>> made = EvalGauges::Create(daemon.metrics());
    if (!made.ok()) {
      LogError() << made.status().message();
      return kExitError;
    }
    gauges = *std::move(made);
  }
  EvaluatorBody body(options, config, *std::move(device), *std::move(metrics), std::move(gauges));
  RunOptions run;
  run.address = options.HealthAddress(config);
  run.listen = run.address.empty() ? RunOptions::Listen::kNone : RunOptions::Listen::kAddress;
  return RunDaemon(daemon, body, run);
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
