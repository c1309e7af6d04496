// The gRPC face of the chief: CoordinatorService over Chief. Every handler is short (a
// Chief call under its mutex), except SubmitJob, which reads the dataset and creates
// variables, and so runs on a thread of the service's own rather than gRPC's.
#ifndef SHARDPS_COORDINATOR_RPC_GRPC_COORDINATOR_SERVICE_H_
#define SHARDPS_COORDINATOR_RPC_GRPC_COORDINATOR_SERVICE_H_

#include <memory>

#include "coordinator/chief.h"
#include "grpcpp/impl/codegen/service_type.h"

namespace shardps {

// `chief` must outlive the service; the service must outlive its server (it joins its
// threads when destroyed).
std::unique_ptr<grpc::Service> NewGrpcCoordinatorService(Chief* chief);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_RPC_GRPC_COORDINATOR_SERVICE_H_
