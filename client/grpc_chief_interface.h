// The gRPC implementation of ChiefInterface: CoordinatorService calls on one channel to the
// chief, each with its own deadline. The channel reconnects by itself after the chief
// restarts.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_CLIENT_GRPC_CHIEF_INTERFACE_H_
#define SHARDPS_CLIENT_GRPC_CHIEF_INTERFACE_H_

#include <memory>
#include <string>

#include "client/chief_interface.h"

namespace shardps {

// `address` is the chief's "host:port". Nothing is dialled until the first call.
std::unique_ptr<ChiefInterface> NewGrpcChiefInterface(const std::string& address);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_GRPC_CHIEF_INTERFACE_H_
