// The edge between gRPC and the rest of shardps: status conversion (the only place that
// translates grpc::Status <-> absl::Status), and channel / server settings shared by every
// daemon and client (unlimited message sizes, separate TCP connections per channel).
//
// Thread-safety: all functions are thread-safe.
#ifndef SHARDPS_RPC_GRPC_UTIL_H_
#define SHARDPS_RPC_GRPC_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/channel.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/status.h"

namespace shardps {

absl::Status FromGrpcStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

// A channel to `address` ("host:port") without gRPC's 4 MB message limit. Channels made with
// different `connection_id`s use different TCP connections, so large transfers can be
// spread over several streams.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, int connection_id = 0);

// Applies shardps' server settings (no message size limit, keepalive) to a builder.
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

// The address a daemon listens on for the TF_CONFIG address `address`: "0.0.0.0:PORT" (or
// "[::]:PORT"), unless `bind_host` overrides the host. Fails when the port cannot be parsed.
absl::StatusOr<std::string> ListenAddress(absl::string_view address,
                                          absl::string_view bind_host);

}  // namespace shardps

#endif  // SHARDPS_RPC_GRPC_UTIL_H_
