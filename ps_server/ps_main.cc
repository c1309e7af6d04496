// The ps daemon: serves its shards of the job's variables over gRPC.
//
//   TF_CONFIG='{"cluster":{"ps":["localhost:2222"],...},"task":{"type":"ps","index":0}}' ps
//
// Exits 0 after a Shutdown RPC (unless --long_lived), 5 on SIGINT/SIGTERM (restart me), 6 when
// no chief has probed it for --orphan_timeout_s, 2 on a bad command line or configuration, 1
// when it cannot serve (port taken). See docs/exit-codes.md.
//
// Memory: --memory_budget_bytes bounds what its shards' parameters and optimizer slots may
// take (CreateShards fails past it, naming the variable), less --snapshot_reserve of it, kept
// for the blocks that updates copy while a checkpoint snapshot is being written. The default
// is 90% of the memory this process may use (the machine's, or its cgroup's limit when
// lower). --max_reply_bytes bounds one pull's reply. --max_request_memory_bytes bounds what
// requests in flight may hold in gRPC's buffers (a resource quota), out of the budget.
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/log.h"
#include "ps_server/process_memory.h"
#include "ps_server/metered_store.h"
#include "ps_server/ps_options.h"
#include "ps_server/rpc/grpc_ps_service.h"
#include "ps_server/shard_store.h"
#include "rpc/daemon.h"
#include "rpc/daemon_run.h"
#include "rpc/executor.h"

namespace shardps {
namespace {

// The store and the service over it. Destroyed after the server, in reverse order: the
// service, the executor (already emptied by FinishShutdown), the store.
class PsBody : public DaemonBody {
 public:
  static absl::StatusOr<std::unique_ptr<PsBody>> Create(const PsOptions& options,
                                                        BudgetSetting budget, Daemon& daemon) {
    auto body = std::unique_ptr<PsBody>(new PsBody(options, std::move(budget)));
    ShardStore::Options store_options;
    store_options.task_index = daemon.config().task_index;
    store_options.memory_budget_bytes = body->budget_.bytes;
    store_options.snapshot_reserve = options.snapshot_reserve;
    store_options.max_reply_bytes = options.max_reply_bytes;
    store_options.data_root = daemon.data_root();
    if (options.test_snapshot_write_delay_ms > 0) {
      // The wait ends early when the daemon stops, so that it never holds up a shutdown (the
      // store joins its snapshot writer).
      store_options.before_snapshot_write = [delay_ms = options.test_snapshot_write_delay_ms,
                                             stopping = &body->stopping_](int64_t id) {
        LogInfo() << "--test_snapshot_write_delay_ms: checkpoint " << id << "'s file waits "
                  << delay_ms << " ms";
        stopping->WaitForNotificationWithTimeout(absl::Milliseconds(delay_ms));
      };
    }
    absl::StatusOr<std::unique_ptr<ShardStore>> store = ShardStore::Create(store_options);
    if (!store.ok()) return store.status();
    if (daemon.metrics_enabled()) {  // without --metrics_port the data path counts nothing
      store = NewMeteredStore(*std::move(store), daemon.metrics());
      if (!store.ok()) return store.status();
    }
    body->store_ = *std::move(store);

    PsServiceOptions service_options;
    service_options.on_chief_probe = [&daemon] { daemon.NoteChiefContact(); };
    service_options.on_shutdown = [&daemon](const std::string& reason) {
      daemon.RequestStop(reason, /*from_rpc=*/true);
    };
    body->executor_ = std::make_unique<Executor>(static_cast<int>(options.threads));
    body->service_ = NewGrpcPsService(body->store_.get(), body->executor_.get(), service_options);
    // A --long_lived ps that holds no shards has nothing to come back for (read by the
    // daemon's StopExitCode, before BeginShutdown).
    daemon.set_idle_check([store = body->store_.get()] {
      ListShardsRequest all;
      ListShardsResponse shards;
      return store->ListShards(all, &shards).ok() && shards.shards_size() == 0;
    });
    return body;
  }

  std::vector<grpc::Service*> Services() override { return {service_.get()}; }
  std::string Describe() const override {
    return absl::StrCat("; memory budget ", budget_.bytes, " bytes (", budget_.source,
                        budget_.request_bytes > 0
                            ? absl::StrCat(", less ", budget_.request_bytes,
                                           " for requests in flight")
                            : std::string(),
                        "), ", options_.snapshot_reserve,
                        " of it reserved for snapshots; replies up to ", options_.max_reply_bytes,
                        " bytes");
  }
  // Waiting pulls fail, and the test aid's wait ends, so that the server can drain.
  void BeginShutdown() override {
    stopping_.Notify();
    store_->Shutdown();
  }
  void FinishShutdown() override { executor_.reset(); }  // runs what calls scheduled

 private:
  PsBody(const PsOptions& options, BudgetSetting budget)
      : options_(options), budget_(std::move(budget)) {}

  const PsOptions options_;
  const BudgetSetting budget_;
  absl::Notification stopping_;  // read by the store's snapshot hook
  std::unique_ptr<ShardStore> store_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<grpc::Service> service_;
};

int Main(int argc, char** argv) {
  FlagParser flags("ps", "shardps parameter-server daemon; the cluster comes from TF_CONFIG.");
  Daemon daemon("ps", &flags);
  PsOptions options;
  options.AddFlags(&flags);
  if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
  absl::StatusOr<BudgetSetting> budget =
      ResolveMemoryBudget(options.memory_budget_bytes, [] { return ProcessMemoryLimit(); });
  if (!budget.ok()) return ExitBadConfig(budget.status().message());
  // Requests in flight are bounded inside the budget (gRPC receives a message whole before
  // it checks its size): what the store may take is the rest.
  absl::StatusOr<RequestMemory> requests = ResolveRequestMemory(
      options.max_request_memory_bytes, budget->bytes, daemon.max_request_bytes());
  if (!requests.ok()) return ExitBadConfig(requests.status().message());
  daemon.set_request_memory_bytes(requests->request_bytes);
  budget->request_bytes = requests->request_bytes;
  budget->bytes = requests->store_bytes;
  absl::StatusOr<std::unique_ptr<PsBody>> body =
      PsBody::Create(options, *std::move(budget), daemon);
  if (!body.ok()) {
    LogError() << body.status();
    return kExitError;
  }
  return RunDaemon(daemon, **body);
}

}  // namespace
}  // namespace shardps

int main(int argc, char** argv) {
  shardps::Daemon::BlockTerminationSignals();
  return shardps::Main(argc, argv);
}
