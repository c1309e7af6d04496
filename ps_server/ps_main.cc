// The ps daemon: serves its shards of the job's variables over gRPC.
//
//   TF_CONFIG='{"cluster":{"ps":["localhost:2222"],...},"task":{"type":"ps","index":0}}' ps
//
// Exits 0 after a Shutdown RPC (unless --long_lived), 5 on SIGINT/SIGTERM (restart me), 6 when
// no chief has probed it for --orphan_timeout_s, 2 on a bad command line or configuration, 1
// when it cannot serve (port taken). See the README's "Exit codes".
//
// Memory: --memory_budget_bytes bounds what its shards' parameters and optimizer slots may
// take (CreateShards fails past it, naming the variable), less --snapshot_reserve of it, kept
// for the blocks that updates copy while a checkpoint snapshot is being written. The default
// is 90% of the memory this process may use (the machine's, or its cgroup's limit when
// lower). --max_reply_bytes bounds one pull's reply.
#include <cmath>
#include <iostream>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "ps_server/process_memory.h"
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
  int64_t memory_budget_bytes = -1;
  double snapshot_reserve = 0.5;
  int64_t max_reply_bytes = int64_t{64} << 20;
  int64_t test_snapshot_write_delay_ms = 0;
  flags.AddInt("threads", &threads, "threads for large requests");
  flags.AddInt("memory_budget_bytes", &memory_budget_bytes,
               "bytes that parameters, optimizer slots and checkpoint snapshots' copies may "
               "take; -1: 90% of the memory this process may use (machine or cgroup); 0: no "
               "budget");
  flags.AddDouble("snapshot_reserve", &snapshot_reserve,
                  "fraction of --memory_budget_bytes kept for the blocks updates copy while a "
                  "checkpoint snapshot is written, in [0, 1)");
  flags.AddInt("max_reply_bytes", &max_reply_bytes,
               "largest reply one pull may ask for (0: no limit)");
  flags.AddInt("test_snapshot_write_delay_ms", &test_snapshot_write_delay_ms,
               "a test aid, not for production: wait this long before writing each checkpoint "
               "snapshot's file, so that a test can kill the ps while it writes one (0: none)");
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
  if (threads < 1 || threads > 256) {
    std::cerr << "error: --threads must be 1..256, got " << threads << "\n";
    return 2;
  }
  if (memory_budget_bytes < -1) {
    std::cerr << "error: --memory_budget_bytes must be >= 0, or -1 for the default, got "
              << memory_budget_bytes << "\n";
    return 2;
  }
  if (!(snapshot_reserve >= 0 && snapshot_reserve < 1)) {
    std::cerr << "error: --snapshot_reserve must be in [0, 1), got " << snapshot_reserve << "\n";
    return 2;
  }
  if (max_reply_bytes < 0) {
    std::cerr << "error: --max_reply_bytes must be >= 0 (0: no limit), got " << max_reply_bytes
              << "\n";
    return 2;
  }
  if (test_snapshot_write_delay_ms < 0) {
    std::cerr << "error: --test_snapshot_write_delay_ms must be >= 0, got "
              << test_snapshot_write_delay_ms << "\n";
    return 2;
  }
  std::string budget_source = "--memory_budget_bytes";
  if (memory_budget_bytes == -1) {
    absl::StatusOr<MemoryLimit> limit = ProcessMemoryLimit();
    if (!limit.ok()) {
      std::cerr << "error: cannot tell the memory this process may use for the default "
                   "--memory_budget_bytes (set it): "
                << limit.status() << "\n";
      return 2;
    }
    memory_budget_bytes = static_cast<int64_t>(std::floor(0.9 * static_cast<double>(limit->bytes)));
    budget_source = "90% of " + std::to_string(limit->bytes) + " bytes (" + limit->source + ")";
  }

  ShardStore::Options store_options;
  store_options.task_index = daemon.config().task_index;
  store_options.memory_budget_bytes = memory_budget_bytes;
  store_options.snapshot_reserve = snapshot_reserve;
  store_options.max_reply_bytes = max_reply_bytes;
  // The test aid's wait ends early when the daemon stops, so that it never holds up a
  // shutdown (the store joins its snapshot writer).
  absl::Notification stopping;
  if (test_snapshot_write_delay_ms > 0) {
    store_options.before_snapshot_write = [&stopping, test_snapshot_write_delay_ms](int64_t id) {
      std::cerr << "ps: --test_snapshot_write_delay_ms: checkpoint " << id << "'s file waits "
                << test_snapshot_write_delay_ms << " ms\n";
      stopping.WaitForNotificationWithTimeout(absl::Milliseconds(test_snapshot_write_delay_ms));
    };
  }
  absl::StatusOr<std::unique_ptr<ShardStore>> store = ShardStore::Create(store_options);
  if (!store.ok()) {
    std::cerr << "error: " << store.status() << "\n";
    return 1;
  }
  // Destroyed in reverse order: the server first (no new calls), then the executor (runs
  // what was scheduled), then the service and the store.
  PsServiceOptions service_options;
  service_options.on_chief_probe = [&daemon] { daemon.NoteChiefContact(); };
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
  std::cerr << "ps: memory budget " << memory_budget_bytes << " bytes (" << budget_source
            << "), " << snapshot_reserve << " of it reserved for snapshots; replies up to "
            << max_reply_bytes << " bytes\n";

  daemon.set_idle_check([store = store->get()] {
    ListShardsRequest all;
    ListShardsResponse shards;
    return store->ListShards(all, &shards).ok() && shards.shards_size() == 0;
  });
  daemon.WaitForStop();
  // Before the store shuts down: an idle --long_lived ps stopped by a signal exits 0.
  const int exit_code = daemon.StopExitCode();
  stopping.Notify();
  (*store)->Shutdown();  // fails waiting pulls, so the server can drain
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server->Wait();
  executor.reset();
  std::cerr << "ps: stopped (" << StopCauseName(daemon.stop_cause()) << "), exit code "
            << exit_code << "\n";
  // 0 after the chief's Shutdown at the job's end (or a signal to an idle --long_lived ps),
  // 5 on SIGTERM/SIGINT otherwise (a supervisor restarts the ps; the chief rolls the job back
  // onto it), 6 when orphaned.
  return exit_code;
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
