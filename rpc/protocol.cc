#include "rpc/protocol.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/protocol_version.h"
#include "rpc/grpc_util.h"

namespace shardps {

void AttachProtocolVersion(grpc::ClientContext* ctx) {
  ctx->AddMetadata(kProtocolMetadataKey, FormatProtocolHeader(LocalProtocol()));
}

absl::Status CheckClientProtocol(const grpc::CallbackServerContext& ctx, absl::string_view daemon) {
  const std::string local_role = absl::StrCat("this ", daemon);
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kProtocolMetadataKey);
  if (it == metadata.end()) {
    return WithDetail(
        absl::FailedPreconditionError(absl::StrCat(
            "the request from ", ctx.peer(), " carries no shardps protocol version (gRPC metadata \"",
            kProtocolMetadataKey, "\"): it is not from a shardps client, or from one older than "
            "protocol 1; ", local_role, " speaks ", DescribeProtocol(LocalProtocol()))),
        ErrorDetail::PROTOCOL_MISMATCH);
  }
  const absl::string_view value(it->second.data(), it->second.size());
  absl::StatusOr<ProtocolRange> peer = ParseProtocolHeader(value);
  if (!peer.ok()) {
    return WithDetail(absl::FailedPreconditionError(absl::StrCat(
                          "the request from ", ctx.peer(), ": ", peer.status().message(), "; ",
                          local_role, " speaks ", DescribeProtocol(LocalProtocol()))),
                      ErrorDetail::PROTOCOL_MISMATCH);
  }
  return CheckProtocolCompatible(*peer, LocalProtocol(), absl::StrCat("the client at ", ctx.peer()),
                                 local_role);
}

grpc::ServerUnaryReactor* RejectIncompatibleClient(grpc::CallbackServerContext* ctx,
                                                   absl::string_view daemon) {
  absl::Status status = CheckClientProtocol(*ctx, daemon);
  if (status.ok()) return nullptr;
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace shardps
