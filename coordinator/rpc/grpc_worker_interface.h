// WorkerInterface over gRPC (WorkerService). CancelAll cancels the ClientContext of every call
// in flight; the worker sees each call cancelled.
#ifndef SHARDPS_COORDINATOR_RPC_GRPC_WORKER_INTERFACE_H_
#define SHARDPS_COORDINATOR_RPC_GRPC_WORKER_INTERFACE_H_

#include <memory>
#include <string>

#include "coordinator/worker_interface.h"

namespace shardps {

std::unique_ptr<WorkerInterface> NewGrpcWorkerInterface(const std::string& address);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_RPC_GRPC_WORKER_INTERFACE_H_
