// The worker daemon: runs the training steps the chief hands it (WorkerService).
//
//   TF_CONFIG='{"cluster":{"ps":[...],"worker":["localhost:2230"]},
//               "task":{"type":"worker","index":0}}' worker [--backend=cpu]
//
// Exit codes (rpc/daemon.h; the README's "Exit codes"): 0 after the chief's Shutdown RPC at
// the job's end (ignored under --long_lived); 5 on SIGINT/SIGTERM (an eviction: restart it);
// 6 after --orphan_timeout_s without a call from the chief (the job is gone: do not restart);
// 2 on a bad command line or configuration; 1 when it cannot serve (port taken, no compute
// backend). Every call from the chief (StartJob, RunStep, Status, Shutdown) resets the
// orphan clock; the chief pings an idle worker with Status every few seconds.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "rpc/daemon.h"
#include "rpc/executor.h"
#include "worker/compute/backend.h"
#include "worker/rpc/grpc_worker_service.h"
#include "worker/step_executor.h"

namespace shardps {
namespace {

// StartJob and RunStep run here. The chief keeps up to two steps in flight (JobSpec
// steps_in_flight), which run at once; a step the chief re-sent after a timed-out lease may
// wait for one of them to finish. A few more threads leave room for a StartJob or Shutdown
// meanwhile.
constexpr int kServiceThreads = 6;

// How long shutdown waits for a step in flight (say, one waiting on the ps for a version)
// before the process exits anyway.
constexpr absl::Duration kShutdownGrace = absl::Seconds(10);

int Main(int argc, char** argv) {
  FlagParser flags("worker", "shardps worker daemon; the cluster comes from TF_CONFIG.");
  Daemon daemon("worker", &flags);
  std::string backend_flag;
  int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  flags.AddString("backend", &backend_flag,
                  "compute backend: auto, cpu or gpu (default: each job's choice)");
  flags.AddInt("threads", &threads, "compute threads of the CPU backend");
  int64_t test_only_delay_before_push_ms = 0;
  flags.AddInt("test_only_delay_before_push_ms", &test_only_delay_before_push_ms,
               "tests only: sleep this long before each step's push (a straggler)");
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;

  BackendKind backend = BackendKind::kAuto;
  if (!backend_flag.empty()) {
    absl::StatusOr<BackendKind> parsed = ParseBackendKind(backend_flag);
    if (!parsed.ok()) {
      std::cerr << "error: --backend: " << parsed.status().message() << "\n";
      return kExitBadConfig;
    }
    backend = *parsed;
  }
  if (threads < 1 || threads > 1024) {
    std::cerr << "error: --threads must be 1..1024, got " << threads << "\n";
    return kExitBadConfig;
  }
  if (test_only_delay_before_push_ms < 0 || test_only_delay_before_push_ms > 600000) {
    std::cerr << "error: --test_only_delay_before_push_ms must be 0..600000, got "
              << test_only_delay_before_push_ms << "\n";
    return kExitBadConfig;
  }

  StepExecutor::Options executor_options;
  executor_options.task_index = daemon.config().task_index;
  executor_options.backend_override = backend;
  executor_options.num_threads = static_cast<int>(threads);
  executor_options.test_only_delay_before_push =
      absl::Milliseconds(test_only_delay_before_push_ms);
  executor_options.connect = [](const std::vector<std::string>& ps_addresses) {
    return NewGrpcPsClient(ps_addresses, PsClient::Options());
  };
  absl::StatusOr<std::unique_ptr<StepExecutor>> step_executor =
      StepExecutor::Create(executor_options);
  if (!step_executor.ok()) {
    std::cerr << "error: worker: " << step_executor.status().message() << "\n";
    return kExitError;
  }

  // Destroyed in reverse order: the server first (no new calls), then the executor (runs what
  // was scheduled, which uses the service and the step executor), then the service.
  WorkerServiceOptions service_options;
  service_options.on_shutdown = [&daemon](const std::string& reason) {
    daemon.RequestStop(reason, /*from_rpc=*/true);
  };
  service_options.on_chief_call = [&daemon] { daemon.NoteChiefContact(); };
  auto executor = std::make_unique<Executor>(kServiceThreads);
  std::unique_ptr<grpc::Service> service =
      NewGrpcWorkerService(step_executor->get(), executor.get(), service_options);
  std::unique_ptr<grpc::Server> server = daemon.Serve({service.get()});
  if (server == nullptr) return kExitError;
  std::cerr << "worker: " << daemon.config().DebugString() << " serving on "
            << daemon.listen_address() << ", backend " << (*step_executor)->BackendName()
            << "\n";

  daemon.set_idle_check(
      [executor = step_executor->get()] { return executor->Status().job_id().empty(); });
  daemon.WaitForStop();
  const int exit_code = daemon.StopExitCode();
  // A step waiting on the ps (for a version, or a ps that is down) would hold up Wait() until
  // its pull gives up; bound the time a stop may take.
  absl::Notification stopped;
  std::thread watchdog([&stopped, exit_code] {
    if (!stopped.WaitForNotificationWithTimeout(kShutdownGrace)) {
      std::cerr << "worker: a step is still running after " << kShutdownGrace
                << "; exiting anyway (exit code " << exit_code << ")\n";
      std::_Exit(exit_code);
    }
  });
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  executor.reset();
  stopped.Notify();
  watchdog.join();
  std::cerr << "worker: stopped (" << StopCauseName(daemon.stop_cause()) << "), exit code "
            << exit_code << "\n";
  return exit_code;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
