// The gRPC implementation of PsInterface: one per ps task, over `num_connections` TCP
// connections; calls are spread round-robin over them so that chunks of a large transfer
// travel on parallel streams.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_CLIENT_GRPC_PS_INTERFACE_H_
#define SHARDPS_CLIENT_GRPC_PS_INTERFACE_H_

#include <memory>
#include <string>

#include "client/ps_interface.h"

namespace shardps {

std::unique_ptr<PsInterface> NewGrpcPsInterface(const std::string& name,
                                                const std::string& address,
                                                int num_connections = 1);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_GRPC_PS_INTERFACE_H_
