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
// Each evaluation is appended to --metrics_file as a JSON line (evaluator/metrics_file.h).
//
// Exit codes (rpc/daemon.h; the README's "Exit codes"): 0 after the final evaluation of a
// job that succeeded (sidecar: of the checkpoint marked final); 4 when the job failed or was
// cancelled (no final evaluation); 5 on SIGINT/SIGTERM; 6 after --orphan_timeout_s without
// an answer from the chief (sidecar: without an answer or a new checkpoint); 2 for a bad
// command line or configuration; 1 when it cannot start (no compute backend). --long_lived
// keeps it running after a job ends (ps mode: it follows the next job) and turns the orphan
// timeout off.
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "grpcpp/server.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "evaluator/eval_loop.h"
#include "evaluator/job_follower.h"
#include "evaluator/metrics_file.h"
#include "evaluator/rpc/grpc_chief_link.h"
#include "evaluator/sidecar.h"
#include "rpc/daemon.h"
#include "worker/compute/backend.h"

namespace shardps {
namespace {

int Main(int argc, char** argv) {
  FlagParser flags("evaluator",
                   "shardps evaluator daemon: evaluates the chief's job on held-out data, live "
                   "from the ps (TF_CONFIG) or from its checkpoints (--checkpoint_dir).");
  Daemon daemon("evaluator", &flags);
  daemon.set_config_optional();
  std::string metrics_file = "evaluator_metrics.jsonl", backend_flag = "cpu", checkpoint_dir;
  int64_t threads = 1;
  double poll_interval_s = 2;
  int64_t health_port = 0;
  flags.AddString("metrics_file", &metrics_file, "append evaluations here as JSON lines");
  flags.AddString("backend", &backend_flag, "compute backend: auto, cpu or gpu");
  flags.AddInt("threads", &threads, "CPU compute threads");
  flags.AddString("checkpoint_dir", &checkpoint_dir,
                  "sidecar mode: evaluate each committed checkpoint in this directory once");
  flags.AddDouble("poll_interval_s", &poll_interval_s,
                  "sidecar mode: how often to look for new checkpoints");
  flags.AddInt("health_port", &health_port,
               "answer gRPC's health check (grpc.health.v1) on this port (all interfaces, or "
               "--bind_host), e.g. for Kubernetes probes where TF_CONFIG leaves the evaluator "
               "out of the cluster (TFJob); default: on TF_CONFIG's evaluator address when the "
               "cluster lists it, else nowhere");
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;

  const bool sidecar = !checkpoint_dir.empty();
  if (!sidecar && !daemon.has_config()) {
    std::cerr << "error: the evaluator follows the chief's job named by TF_CONFIG (or "
                 "--tf_config), or evaluates a checkpoint directory (--checkpoint_dir); "
                 "neither was given\n";
    return kExitBadConfig;
  }
  const bool has_chief = daemon.has_config() && daemon.config().NumTasks("chief") == 1;
  if (!sidecar && !has_chief) {
    std::cerr << "error: TF_CONFIG: cluster.chief: the evaluator needs the chief's address\n";
    return kExitBadConfig;
  }
  if (!(poll_interval_s > 0)) {
    std::cerr << "error: --poll_interval_s must be > 0, got " << poll_interval_s << "\n";
    return kExitBadConfig;
  }
  if (threads < 1 || threads > 1024) {
    std::cerr << "error: --threads must be 1..1024, got " << threads << "\n";
    return kExitBadConfig;
  }
  if (health_port < 0 || health_port > 65535) {
    std::cerr << "error: --health_port must be 1..65535 (or 0: TF_CONFIG's), got " << health_port
              << "\n";
    return kExitBadConfig;
  }
  // The evaluator serves no RPC of its own; it listens only to answer health checks.
  std::unique_ptr<grpc::Server> health_server;
  const std::string health_address =
      health_port > 0 ? absl::StrCat("0.0.0.0:", health_port)
                      : (daemon.has_config() ? daemon.config().TaskAddress() : std::string());
  if (!health_address.empty()) {
    health_server = daemon.ServeAt(health_address, {});
    if (health_server == nullptr) return kExitError;
  }
  absl::StatusOr<BackendKind> kind = ParseBackendKind(backend_flag);
  if (!kind.ok()) {
    std::cerr << "error: --backend: " << kind.status().message() << "\n";
    return kExitBadConfig;
  }
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      ComputeBackend::Create(*kind, static_cast<int>(threads));
  if (!backend.ok()) {
    std::cerr << "error: " << backend.status().message() << "\n";
    return kExitError;
  }
  absl::StatusOr<std::unique_ptr<MetricsFile>> metrics = MetricsFile::Open(metrics_file);
  if (!metrics.ok()) {
    std::cerr << "error: --metrics_file: " << metrics.status().message() << "\n";
    return kExitBadConfig;
  }
  std::unique_ptr<ChiefLink> chief;
  std::string chief_address;
  if (has_chief) {
    chief_address = daemon.config().Tasks("chief")[0];
    chief = NewGrpcChiefLink(chief_address);
  }
  std::cerr << "evaluator: "
            << (daemon.has_config() ? daemon.config().DebugString() : std::string("no TF_CONFIG"))
            << (sidecar ? absl::StrCat(", sidecar of ", checkpoint_dir) : std::string(", ps mode"))
            << (has_chief ? absl::StrCat(", chief at ", chief_address) : std::string())
            << ", backend " << (*backend)->Name() << ", metrics to " << metrics_file
            << (health_server ? absl::StrCat(", health checks on ", daemon.listen_address())
                              : std::string())
            << "\n";

  EvalLoopHooks hooks;
  hooks.sleep = [&daemon](absl::Duration timeout) {
    return daemon.WaitForStopWithTimeout(timeout);
  };
  hooks.on_contact = [&daemon] { daemon.NoteChiefContact(); };
  hooks.on_eval = [&metrics](const EvalRecord& record) {
    absl::Status written = (*metrics)->Append(record);
    if (!written.ok()) std::cerr << "evaluator: " << written << "\n";
  };

  EvalOutcome outcome;
  if (sidecar) {
    SidecarOptions options;
    options.checkpoint_dir = checkpoint_dir;
    options.backend = backend->get();
    options.chief = chief.get();
    options.long_lived = daemon.long_lived();
    options.poll_interval = absl::Seconds(poll_interval_s);
    outcome = RunSidecar(options, hooks);
  } else {
    JobFollowerOptions options;
    options.chief = chief.get();
    options.backend = backend->get();
    options.long_lived = daemon.long_lived();
    const std::vector<std::string> ps_addresses = daemon.config().Tasks("ps");
    options.connect_ps = [ps_addresses] {
      return NewGrpcPsClient(ps_addresses, PsClient::Options());
    };
    outcome = FollowChiefJobs(options, hooks);
  }
  switch (outcome) {
    case EvalOutcome::kSucceeded:
      return kExitDone;
    case EvalOutcome::kJobFailed:
      return kExitJobFailed;
    case EvalOutcome::kStopped:
      break;
  }
  const int code = daemon.StopExitCode();
  std::cerr << "evaluator: stopped (" << StopCauseName(daemon.stop_cause()) << "), exit code "
            << code << "\n";
  return code;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
