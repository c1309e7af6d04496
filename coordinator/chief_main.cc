// The chief daemon: the job's coordinator. Serves CoordinatorService at its TF_CONFIG
// address; runs the job given by --job (a JSON file) at once, or one submitted by shardctl.
// When the job ends (and the evaluator, if any, has reported its final evaluation), it
// tells every worker and ps to shut down and exits: 0 if the job succeeded, 4 if it failed
// or was cancelled; 2 for a bad command line, configuration or job file. With --long_lived
// it keeps serving and accepts the next job instead.
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
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
  std::string job_file;
  int64_t final_eval_timeout_s = 120;
  flags.AddString("job", &job_file, "run this job file at once (else wait for shardctl submit)");
  flags.AddInt("final_eval_timeout_s", &final_eval_timeout_s,
               "seconds to wait for the evaluator's final evaluation after training");
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
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
  options.has_evaluator = config.NumTasks("evaluator") > 0;
  options.final_eval_timeout = absl::Seconds(final_eval_timeout_s);
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

  if (!job_json.empty()) {
    // The ps tasks may still be starting: wait for them before creating variables.
    absl::Time deadline = absl::Now() + absl::Seconds(60);
    std::vector<HealthResponse> health;
    absl::Status ps_health;
    while (!(ps_health = (*ps)->Health(&health)).ok() && absl::Now() < deadline &&
           !daemon.stop_requested()) {
      absl::SleepFor(absl::Milliseconds(200));
    }
    if (!ps_health.ok()) {
      std::cerr << "error: ps tasks unreachable: " << ps_health.message() << "\n";
      server->Shutdown();
      return 1;
    }
    absl::StatusOr<SubmitJobResponse> submitted = (*chief)->Submit(job_json);
    if (!submitted.ok()) {
      std::cerr << "error: " << submitted.status().message() << "\n";
      server->Shutdown();
      return submitted.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    std::cerr << "chief: job " << submitted->job_id() << " started, " << submitted->total_steps()
              << " steps\n";
  }

  int exit_code = 0;
  while (!daemon.stop_requested()) {
    JobStatus status = (*chief)->Status();
    if (status.state() == JobStatus::NO_JOB || status.state() == JobStatus::RUNNING ||
        !(*chief)->WaitForJobEnd(absl::ZeroDuration())) {
      daemon.WaitForStopWithTimeout(absl::Milliseconds(200));
      continue;
    }
    std::cerr << "chief: job " << status.job_id() << " "
              << JobStatus::State_Name(status.state()) << " after " << status.steps_done()
              << " steps" << (status.error().empty() ? "" : ": ") << status.error() << "\n";
    exit_code = status.state() == JobStatus::SUCCEEDED ? 0 : 4;
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
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  std::cerr << "chief: stopped\n";
  return exit_code;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
