// The gRPC face of a worker task: a thin adapter from WorkerService's callback API to
// StepExecutor. StartJob and RunStep load data, wait on the ps and compute, so they run on
// `executor`, never on gRPC's threads; Status is answered inline; Shutdown replies, then
// calls options.on_shutdown on the executor. Errors go back with their code and typed detail
// (ToGrpcStatus), so a ps failure behind a step reaches the chief as one. Every call counts
// as contact from the chief (options.on_chief_call): only the chief calls a worker, and it
// pings an idle one with Status every few seconds.
//
// Thread-safety: the service is thread-safe; `step_executor` and `executor` must outlive it,
// and the executor must run (or drop) what it was given before the step executor is gone.
#ifndef SHARDPS_WORKER_RPC_GRPC_WORKER_SERVICE_H_
#define SHARDPS_WORKER_RPC_GRPC_WORKER_SERVICE_H_

#include <functional>
#include <memory>
#include <string>

#include "grpcpp/impl/codegen/service_type.h"
#include "rpc/executor.h"
#include "worker/step_executor.h"

namespace shardps {

struct WorkerServiceOptions {
  // Called (once per Shutdown RPC, on the executor) after the reply has been sent.
  std::function<void(const std::string& reason)> on_shutdown;
  // Called on gRPC's thread as each call from the chief arrives (StartJob, RunStep, Status,
  // Shutdown), before it is handled: the daemon's orphan clock (Daemon::NoteChiefContact).
  // Must be cheap and must not block.
  std::function<void()> on_chief_call;
};

std::unique_ptr<grpc::Service> NewGrpcWorkerService(StepExecutor* step_executor, Executor* executor,
                                                    WorkerServiceOptions options);

}  // namespace shardps

#endif  // SHARDPS_WORKER_RPC_GRPC_WORKER_SERVICE_H_
