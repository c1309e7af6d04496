// The ps daemon: serves its shards of the job's variables over gRPC.
//
//   TF_CONFIG='{"cluster":{"ps":["localhost:2222"],...},"task":{"type":"ps","index":0}}' ps
//
// Exits 0 after a Shutdown RPC (unless --long_lived) or SIGINT/SIGTERM, 2 on a bad command
// line or configuration, 1 when it cannot serve (port taken).
#include <iostream>

#include "common/flags.h"
#include "ps_server/rpc/grpc_ps_service.h"
#include "ps_server/shard_store.h"
#include "rpc/daemon.h"
#include "rpc/executor.h"

namespace shardps {
namespace {

int Main(int argc, char** argv) {
  FlagParser flags("ps", "shardps parameter-server daemon; the cluster comes from TF_CONFIG.");
  Daemon daemon("ps", &flags);
  int64_t threads = 4;
  flags.AddInt("threads", &threads, "threads for large requests");
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
  if (threads < 1 || threads > 256) {
    std::cerr << "error: --threads must be 1..256, got " << threads << "\n";
    return 2;
  }

  ShardStore::Options store_options;
  store_options.task_index = daemon.config().task_index;
  absl::StatusOr<std::unique_ptr<ShardStore>> store = ShardStore::Create(store_options);
  if (!store.ok()) {
    std::cerr << "error: " << store.status() << "\n";
    return 1;
  }
  // Destroyed in reverse order: the server first (no new calls), then the executor (runs
  // what was scheduled), then the service and the store.
  PsServiceOptions service_options;
  service_options.on_shutdown = [&daemon](const std::string& reason) {
    daemon.RequestStop(reason, /*from_rpc=*/true);
  };
  auto executor = std::make_unique<Executor>(static_cast<int>(threads));
  std::unique_ptr<grpc::Service> service =
      NewGrpcPsService(store->get(), executor.get(), service_options);
  std::unique_ptr<grpc::Server> server = daemon.Serve({service.get()});
  if (server == nullptr) return 1;
  std::cerr << "ps: " << daemon.config().DebugString() << " serving on "
            << daemon.listen_address() << "\n";

  daemon.WaitForStop();
  (*store)->Shutdown();  // fails waiting pulls, so the server can drain
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  executor.reset();
  std::cerr << "ps: stopped\n";
  return 0;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
