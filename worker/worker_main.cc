// The worker daemon: runs the training steps the chief hands it (WorkerService).
//
//   TF_CONFIG='{"cluster":{"ps":[...],"worker":["localhost:2230"]},
//               "task":{"type":"worker","index":0}}' worker [--backend=cpu]
//
// Exits 0 after a Shutdown RPC (unless --long_lived) or SIGINT/SIGTERM, 2 on a bad command
// line or configuration, 1 when it cannot serve (port taken, no compute backend).
#include <pthread.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "common/daemon_config.h"
#include "common/flags.h"
#include "common/tf_config.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "rpc/executor.h"
#include "rpc/grpc_util.h"
#include "worker/compute/backend.h"
#include "worker/rpc/grpc_worker_service.h"
#include "worker/step_executor.h"

namespace shardps {
namespace {

// StartJob and RunStep run here. The chief sends one step at a time, so a few threads leave
// room for a StartJob or Shutdown while a step waits on the ps.
constexpr int kServiceThreads = 4;

// How long shutdown waits for a step in flight (say, one waiting on the ps for a version)
// before the process exits anyway.
constexpr absl::Duration kShutdownGrace = absl::Seconds(10);

int Main(int argc, char** argv) {
  std::string tf_config_flag;
  std::string bind_host;
  std::string backend_flag;
  bool validate_only = false;
  bool long_lived = false;
  int64_t threads = std::thread::hardware_concurrency();
  if (threads < 1) threads = 1;
  FlagParser flags("worker", "shardps worker daemon; the cluster comes from TF_CONFIG.");
  flags.AddString("tf_config", &tf_config_flag,
                  "cluster config: inline JSON or a file path (default: $TF_CONFIG)");
  flags.AddBool("validate_config", &validate_only,
                "only validate the configuration: print the task and address, exit 0 or 2");
  flags.AddString("bind_host", &bind_host,
                  "host to listen on (default: all interfaces, port from TF_CONFIG)");
  flags.AddBool("long_lived", &long_lived,
                "keep serving after a Shutdown RPC (a service outliving one job)");
  flags.AddString("backend", &backend_flag,
                  "compute backend: auto, cpu or gpu (default: each job's choice)");
  flags.AddInt("threads", &threads, "compute threads of the CPU backend");
  int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;

  if (validate_only) {
    return ValidateConfigMain(LoadTfConfig(tf_config_flag, std::getenv("TF_CONFIG")), "worker",
                              std::cout, std::cerr);
  }
  absl::StatusOr<TfConfig> config =
      LoadDaemonConfig(tf_config_flag, std::getenv("TF_CONFIG"), "worker");
  if (!config.ok()) {
    std::cerr << "error: " << config.status().message() << "\n";
    return 2;
  }
  BackendKind backend = BackendKind::kAuto;
  if (!backend_flag.empty()) {
    absl::StatusOr<BackendKind> parsed = ParseBackendKind(backend_flag);
    if (!parsed.ok()) {
      std::cerr << "error: --backend: " << parsed.status().message() << "\n";
      return 2;
    }
    backend = *parsed;
  }
  if (threads < 1 || threads > 1024) {
    std::cerr << "error: --threads must be 1..1024, got " << threads << "\n";
    return 2;
  }
  absl::StatusOr<std::string> listen = ListenAddress(config->TaskAddress(), bind_host);
  if (!listen.ok()) {
    std::cerr << "error: " << listen.status().message() << "\n";
    return 2;
  }

  StepExecutor::Options executor_options;
  executor_options.task_index = config->task_index;
  executor_options.backend_override = backend;
  executor_options.num_threads = static_cast<int>(threads);
  executor_options.connect = [](const std::vector<std::string>& ps_addresses) {
    return NewGrpcPsClient(ps_addresses, PsClient::Options());
  };
  absl::StatusOr<std::unique_ptr<StepExecutor>> step_executor =
      StepExecutor::Create(executor_options);
  if (!step_executor.ok()) {
    std::cerr << "error: worker: " << step_executor.status().message() << "\n";
    return 1;
  }

  // Destroyed in reverse order: the server first (no new calls), then the executor (runs what
  // was scheduled, which uses the service and the step executor), then the service.
  absl::Notification stop;
  WorkerServiceOptions service_options;
  service_options.on_shutdown = [&stop, long_lived](const std::string& reason) {
    std::cerr << "worker: shutdown requested" << (reason.empty() ? "" : ": ") << reason
              << (long_lived ? " (ignored: --long_lived)" : "") << "\n";
    if (!long_lived && !stop.HasBeenNotified()) stop.Notify();
  };
  auto executor = std::make_unique<Executor>(kServiceThreads);
  std::unique_ptr<grpc::Service> service =
      NewGrpcWorkerService(step_executor->get(), executor.get(), service_options);

  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);  // also turns SO_REUSEPORT off: a taken port fails
  int bound_port = 0;
  builder.AddListeningPort(*listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::cerr << "error: worker: cannot listen on " << *listen << " (port in use?)\n";
    return 1;
  }
  std::cerr << "worker: " << config->DebugString() << " serving on " << *listen << ", backend "
            << (*step_executor)->BackendName() << "\n";

  // Signals are taken by a thread of their own through sigwait, so that shutdown runs in an
  // ordinary thread.
  std::thread signals([&stop] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    while (sigwait(&set, &sig) == 0) {
      if (sig == SIGINT || sig == SIGTERM) {
        if (!stop.HasBeenNotified()) {
          std::cerr << "worker: signal " << sig << ", shutting down\n";
          stop.Notify();
        }
        return;
      }
    }
  });
  stop.WaitForNotification();

  // A step waiting on the ps (for a version, or a ps that is down) would hold up Wait() until
  // its pull gives up; bound the time a stop may take.
  absl::Notification stopped;
  std::thread watchdog([&stopped] {
    if (!stopped.WaitForNotificationWithTimeout(kShutdownGrace)) {
      std::cerr << "worker: a step is still running after " << kShutdownGrace
                << "; exiting anyway\n";
      std::_Exit(0);
    }
  });
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  executor.reset();
  stopped.Notify();
  watchdog.join();
  // Wake the signal thread if it is still waiting.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  std::cerr << "worker: stopped\n";
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  // Block SIGINT/SIGTERM in every thread (gRPC's too); the signal thread takes them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return shardps::Main(argc, argv);
}
