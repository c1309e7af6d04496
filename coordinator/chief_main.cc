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
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
#include "common/error_detail.h"
#include "common/flags.h"
#include "coordinator/chief.h"
#include "coordinator/rpc/grpc_coordinator_service.h"
#include "coordinator/rpc/grpc_worker_interface.h"
#include "rpc/daemon.h"

namespace shardps {
namespace {

int Main(int argc, char** argv) {
  FlagParser flags("chief",
                   "shardps chief (coordinator) daemon; the cluster comes from TF_CONFIG.");
  Daemon daemon("chief", &flags);
  std::string job_file, checkpoint_dir;
  int64_t final_eval_timeout_s = 120, ps_wait_s = 300, checkpoint_every_s = 30,
          interrupt_timeout_s = 60;
  bool resume = false, fresh = false;
  std::string evaluator_flag = "auto";
  flags.AddString("job", &job_file, "run this job file at once (else wait for shardctl submit)");
  flags.AddString("checkpoint_dir", &checkpoint_dir,
                  "checkpoint directory for jobs whose job file names none");
  flags.AddInt("checkpoint_every_s", &checkpoint_every_s,
               "with --checkpoint_dir, for jobs without a checkpoint schedule: seconds between "
               "checkpoints");
  flags.AddBool("resume", &resume, "--job: resume the job; fail if there is nothing to resume");
  flags.AddBool("fresh", &fresh,
                "--job: start from step 0, removing the job's checkpoints and journal");
  flags.AddInt("final_eval_timeout_s", &final_eval_timeout_s,
               "seconds to wait for the evaluator's final evaluation after training");
  flags.AddString("evaluator", &evaluator_flag,
                  "whether an evaluator follows the jobs, so that a job waits for its final "
                  "evaluation: auto (TF_CONFIG's cluster lists one), yes (one runs outside the "
                  "cluster, as under Kubeflow's TFJob), no");
  flags.AddInt("ps_wait_s", &ps_wait_s, "--job: seconds to wait for every ps to answer");
  flags.AddInt("interrupt_timeout_s", &interrupt_timeout_s,
               "on SIGTERM: seconds to wait for the job's checkpoint before exiting");
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
  if (resume && fresh) {
    std::cerr << "error: --resume and --fresh exclude each other\n";
    return 2;
  }
  for (const auto& [name, value] : {std::pair<const char*, int64_t>{"final_eval_timeout_s",
                                                                    final_eval_timeout_s},
                                    {"ps_wait_s", ps_wait_s},
                                    {"checkpoint_every_s", checkpoint_every_s},
                                    {"interrupt_timeout_s", interrupt_timeout_s}}) {
    if (value < 0 || value > 365 * 86400) {
      std::cerr << "error: --" << name << " must be 0.." << 365 * 86400 << ", got " << value
                << "\n";
      return 2;
    }
  }
  if (evaluator_flag != "auto" && evaluator_flag != "yes" && evaluator_flag != "no") {
    std::cerr << "error: --evaluator must be auto, yes or no, got \"" << evaluator_flag
              << "\"\n";
    return 2;
  }
  if (checkpoint_every_s == 0) checkpoint_every_s = 30;
  const TfConfig& config = daemon.config();
  const bool long_lived = daemon.long_lived();
  std::string job_json;
  if (!job_file.empty()) {
    std::ifstream in(job_file);
    if (!in) {
      std::cerr << "error: --job: cannot read \"" << job_file << "\"\n";
      return 2;
    }
    std::stringstream ss;
    ss << in.rdbuf();
    job_json = ss.str();
  }

  absl::StatusOr<std::unique_ptr<PsClient>> ps =
      NewGrpcPsClient(config.Tasks("ps"), PsClient::Options());
  if (!ps.ok()) {
    std::cerr << "error: " << ps.status() << "\n";
    return 1;
  }
  Chief::Options options;
  options.ps_addresses = config.Tasks("ps");
  for (const std::string& address : config.Tasks("worker")) {
    options.workers.push_back(NewGrpcWorkerInterface(address));
  }
  options.ps = ps->get();
  options.has_evaluator = evaluator_flag == "auto" ? config.NumTasks("evaluator") > 0
                                                   : evaluator_flag == "yes";
  options.final_eval_timeout = absl::Seconds(final_eval_timeout_s);
  options.default_checkpoint_dir = checkpoint_dir;
  options.default_checkpoint_every = absl::Seconds(checkpoint_every_s);
  absl::StatusOr<std::unique_ptr<Chief>> chief = Chief::Create(std::move(options));
  if (!chief.ok()) {
    std::cerr << "error: " << chief.status().message() << "\n";
    return 2;
  }
  std::unique_ptr<grpc::Service> service = NewGrpcCoordinatorService(chief->get());
  std::unique_ptr<grpc::Server> server = daemon.Serve({service.get()});
  if (server == nullptr) return 1;
  std::cerr << "chief: " << config.DebugString() << " serving on " << daemon.listen_address()
            << " (" << config.NumTasks("ps") << " ps, " << config.NumTasks("worker")
            << " workers)\n";
  auto stop_server = [&server] {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
    server->Wait();
  };

  if (!job_json.empty()) {
    // The ps tasks may still be starting (or restarting): wait for them before the job.
    absl::Time deadline = absl::Now() + absl::Seconds(ps_wait_s);
    std::vector<HealthResponse> health;
    absl::Status ps_health;
    // A ps of another protocol version is no ps that is starting: say so at once.
    while (!(ps_health = (*ps)->Health(&health)).ok() && absl::Now() < deadline &&
           DetailKind(ps_health) != ErrorDetail::PROTOCOL_MISMATCH && !daemon.stop_requested()) {
      daemon.WaitForStopWithTimeout(absl::Milliseconds(500));
    }
    if (daemon.stop_requested()) {
      stop_server();
      return kExitInterrupted;
    }
    if (DetailKind(ps_health) == ErrorDetail::PROTOCOL_MISMATCH) {
      std::cerr << "error: " << ps_health.message() << "\n";
      stop_server();
      return kExitError;
    }
    if (!ps_health.ok()) {
      std::cerr << "error: ps tasks unreachable for " << ps_wait_s
                << " s: " << ps_health.message() << "\n";
      stop_server();
      return 1;
    }
    const SubmitJobRequest::Resume mode = resume  ? SubmitJobRequest::RESUME
                                          : fresh ? SubmitJobRequest::FRESH
                                                  : SubmitJobRequest::AUTO;
    absl::StatusOr<SubmitJobResponse> submitted = (*chief)->Submit(job_json, mode);
    if (!submitted.ok()) {
      std::cerr << "error: " << submitted.status().message() << "\n";
      stop_server();
      return submitted.status().code() == absl::StatusCode::kInvalidArgument ? kExitBadConfig
                                                                              : kExitError;
    }
    if (submitted->already_finished()) {
      std::cerr << "chief: job " << submitted->job_id() << " had already finished ("
                << submitted->resumed_from() << "); nothing to train\n";
    } else {
      std::cerr << "chief: job " << submitted->job_id() << " started, "
                << submitted->total_steps() << " steps"
                << (submitted->resumed_from().empty()
                        ? std::string()
                        : absl::StrCat(", resumed at step ", submitted->resumed_at_step(),
                                       " from ", submitted->resumed_from()))
                << "\n";
    }
  }

  int exit_code = 0;
  while (true) {
    if (daemon.stop_requested()) {
      // SIGTERM / SIGINT (a Shutdown RPC does not reach a chief): eviction or Ctrl-C.
      if ((*chief)->Interrupt(absl::Seconds(interrupt_timeout_s))) {
        std::cerr << "chief: interrupted while the job ran; exiting 5 so that a supervisor "
                     "restarts the chief, which resumes the job\n";
        exit_code = kExitInterrupted;
      }
      break;
    }
    JobStatus status = (*chief)->Status();
    if (status.state() == JobStatus::NO_JOB || status.state() == JobStatus::RUNNING ||
        !(*chief)->WaitForJobEnd(absl::ZeroDuration())) {
      daemon.WaitForStopWithTimeout(absl::Milliseconds(200));
      continue;
    }
    std::cerr << "chief: job " << status.job_id() << " "
              << JobStatus::State_Name(status.state()) << " after " << status.steps_done()
              << " steps" << (status.error().empty() ? "" : ": ") << status.error() << "\n";
    exit_code = status.state() == JobStatus::SUCCEEDED ? kExitDone : kExitJobFailed;
    if (long_lived) {
      // Keep the cluster; wait for the next job.
      while (!daemon.stop_requested() && (*chief)->Status().job_id() == status.job_id()) {
        daemon.WaitForStopWithTimeout(absl::Milliseconds(200));
      }
      continue;
    }
    // Give the CLI a moment to read the final status, then stop the cluster.
    absl::SleepFor(absl::Seconds(1));
    (*chief)->ShutdownCluster(absl::StrCat("job ", status.job_id(), " ended"));
    break;
  }
  stop_server();
  std::cerr << "chief: stopped\n";
  return exit_code;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
