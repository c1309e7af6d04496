// The gRPC face of a ps task: a thin adapter from PsService's callback API to ShardStore.
// Small requests are served on gRPC's thread (a copy of a few KiB costs less than a thread
// hop); requests that carry or return large tensors are handed to `executor`. Pulls that wait
// for a version hold no thread at all: the store completes them when the version arrives.
//
// Thread-safety: the service is thread-safe; `store` and `executor` must outlive it.
#ifndef SHARDPS_PS_SERVER_RPC_GRPC_PS_SERVICE_H_
#define SHARDPS_PS_SERVER_RPC_GRPC_PS_SERVICE_H_

#include <functional>
#include <memory>
#include <string>

#include "grpcpp/impl/codegen/service_type.h"
#include "ps_server/shard_store.h"
#include "rpc/executor.h"

namespace shardps {

struct PsServiceOptions {
  std::string task_type = "ps";
  // Called (once per Shutdown RPC) after the reply has been sent.
  std::function<void(const std::string& reason)> on_shutdown;
  // Called on gRPC's thread for every Health probe the chief sends (HealthRequest.from_chief):
  // the daemon's orphan clock. Must be cheap and not block.
  std::function<void()> on_chief_probe;
  // Payloads up to this size are served inline on gRPC's thread: a training step's pushes
  // (an optimizer update of ~0.1 ms) cost less than the thread wake-up an executor needs.
  int64_t inline_bytes = 1 << 20;
};

std::unique_ptr<grpc::Service> NewGrpcPsService(ShardStore* store, Executor* executor,
                                                PsServiceOptions options);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_RPC_GRPC_PS_SERVICE_H_
