// The ps daemon: serves its shards of the job's variables over gRPC.
//
//   TF_CONFIG='{"cluster":{"ps":["localhost:2222"],...},"task":{"type":"ps","index":0}}' ps
//
// Exits 0 after a Shutdown RPC (unless --long_lived) or SIGINT/SIGTERM, 2 on a bad command
// line or configuration, 1 when it cannot serve (port taken).
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/daemon_config.h"
#include "common/flags.h"
#include "common/tf_config.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "ps_server/rpc/grpc_ps_service.h"
#include "ps_server/shard_store.h"
#include "rpc/executor.h"
#include "rpc/grpc_util.h"

namespace shardps {
namespace {


int Main(int argc, char** argv) {
  std::string tf_config_flag;
  std::string bind_host;
  bool validate_only = false;
  bool long_lived = false;
  int64_t threads = 4;
  FlagParser flags("ps", "shardps parameter-server daemon; the cluster comes from TF_CONFIG.");
  flags.AddString("tf_config", &tf_config_flag,
                  "cluster config: inline JSON or a file path (default: $TF_CONFIG)");
  flags.AddBool("validate_config", &validate_only,
                "only validate the configuration: print the task and address, exit 0 or 2");
  flags.AddString("bind_host", &bind_host,
                  "host to listen on (default: all interfaces, port from TF_CONFIG)");
  flags.AddBool("long_lived", &long_lived,
                "keep serving after a Shutdown RPC (a service outliving one job)");
  flags.AddInt("threads", &threads, "threads for large requests");
  int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;

  if (validate_only) {
    return ValidateConfigMain(LoadTfConfig(tf_config_flag, std::getenv("TF_CONFIG")), "ps",
                              std::cout, std::cerr);
  }
  absl::StatusOr<TfConfig> config =
      LoadDaemonConfig(tf_config_flag, std::getenv("TF_CONFIG"), "ps");
  if (!config.ok()) {
    std::cerr << "error: " << config.status().message() << "\n";
    return 2;
  }
  if (threads < 1 || threads > 256) {
    std::cerr << "error: --threads must be 1..256, got " << threads << "\n";
    return 2;
  }

  ShardStore::Options store_options;
  store_options.task_index = config->task_index;
  absl::StatusOr<std::unique_ptr<ShardStore>> store = ShardStore::Create(store_options);
  if (!store.ok()) {
    std::cerr << "error: " << store.status() << "\n";
    return 1;
  }
  Executor executor(static_cast<int>(threads));
  absl::Notification stop;
  PsServiceOptions service_options;
  service_options.on_shutdown = [&stop, long_lived](const std::string& reason) {
    std::cerr << "ps: shutdown requested" << (reason.empty() ? "" : ": ") << reason
              << (long_lived ? " (ignored: --long_lived)" : "") << "\n";
    if (!long_lived && !stop.HasBeenNotified()) stop.Notify();
  };
  std::unique_ptr<grpc::Service> service =
      NewGrpcPsService(store->get(), &executor, service_options);

  absl::StatusOr<std::string> listen = ListenAddress(config->TaskAddress(), bind_host);
  if (!listen.ok()) {
    std::cerr << "error: " << listen.status().message() << "\n";
    return 2;
  }
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int bound_port = 0;
  builder.AddListeningPort(*listen, grpc::InsecureServerCredentials(), &bound_port);
  builder.RegisterService(service.get());
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::cerr << "error: ps: cannot listen on " << *listen << " (port in use?)\n";
    return 1;
  }
  std::cerr << "ps: " << config->DebugString() << " serving on " << *listen << "\n";

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
        std::cerr << "ps: signal " << sig << ", shutting down\n";
        if (!stop.HasBeenNotified()) stop.Notify();
        return;
      }
    }
  });
  stop.WaitForNotification();
  (*store)->Shutdown();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  // Wake the signal thread if it is still waiting.
  pthread_kill(signals.native_handle(), SIGTERM);
  signals.join();
  std::cerr << "ps: stopped\n";
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
