// Ps tasks inside a coordinator test's process: task k is a ShardStore (task_index k) served
// through NewLocalPsInterface as "<prefix><k>", optionally behind an InterceptingPsInterface
// (so that the test can fail the task's calls, or restart it as a new incarnation holding
// nothing), with one PsClient over them all.
//
// Thread safety: client() and interceptor() may be used from any thread; the rest from the
// test's thread.
#ifndef SHARDPS_COORDINATOR_IN_PROCESS_PS_H_
#define SHARDPS_COORDINATOR_IN_PROCESS_PS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/intercepting_ps_interface.h"
#include "client/ps_client.h"
#include "ps_server/shard_store.h"

namespace shardps {

class InProcessPs {
 public:
  struct Options {
    int num_tasks = 2;
    std::string name_prefix = "ps";  // task k is called name_prefix + k
    // Task k's incarnation is first_incarnation + k; 0: each drawn at random.
    uint64_t first_incarnation = 0;
    // Every store's options (memory budget, ...); task_index and incarnation are set per task.
    ShardStore::Options store;
    // Behind interceptors (interceptor(), Down, Up, Restart), or the client on the local
    // interfaces themselves.
    bool intercept = false;
    PsClient::Options client;
  };

  // The stores' and the client's errors.
  static absl::StatusOr<std::unique_ptr<InProcessPs>> Create(Options options);

  // Shuts every store down.
  ~InProcessPs();

  InProcessPs(const InProcessPs&) = delete;
  InProcessPs& operator=(const InProcessPs&) = delete;

  PsClient* client() const { return client_.get(); }
  std::string name(int k) const;
  // Task k's store: its latest incarnation.
  ShardStore* store(int k) const { return current_[k]; }
  // Task k's interceptor. REQUIRES: intercept.
  InterceptingPsInterface* interceptor(int k) const { return interceptors_[k]; }

  // Task k's calls fail UNAVAILABLE ("connection refused") until Up(k). REQUIRES: intercept.
  void Down(int k);
  void Up(int k);
  // Task k restarts: a new store of `incarnation`, holding nothing, serves its later calls
  // (the old one is kept, and shut down with the others). REQUIRES: intercept.
  absl::Status Restart(int k, uint64_t incarnation);

  // A new client of the tasks named `names` (name(k)), in that order, on their current
  // stores: the chief's Options::connect_ps. Calls through it see SetConnectedHook(k) (and
  // Down(k)). NOT_FOUND for a name that is no task's.
  absl::StatusOr<std::shared_ptr<PsClient>> Connect(const std::vector<std::string>& names);
  // What task k's calls through clients of Connect see first (null: nothing).
  void SetConnectedHook(int k, InterceptingPsInterface::Interceptor hook);

  // Shuts every store down (waiting pulls fail CANCELLED). Idempotent.
  void Shutdown();

 private:
  explicit InProcessPs(Options options) : options_(std::move(options)) {}
  absl::StatusOr<ShardStore*> NewStore(int k, uint64_t incarnation);

  const Options options_;
  std::vector<std::unique_ptr<ShardStore>> stores_;  // every incarnation; outlive the client
  std::vector<ShardStore*> current_;                  // per task
  std::vector<InterceptingPsInterface*> interceptors_;  // per task, owned by client_
  std::unique_ptr<PsClient> client_;
  absl::Mutex hooks_mu_;
  std::vector<InterceptingPsInterface::Interceptor> hooks_ ABSL_GUARDED_BY(hooks_mu_);
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_IN_PROCESS_PS_H_
