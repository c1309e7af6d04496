// The wire protocol's version on every RPC (common/protocol_version.h says what it means).
// Every shardps client call carries this process's range (AttachProtocolVersion), and every
// handler of a shardps service first refuses a caller whose range does not overlap, or that
// sends none (RejectIncompatibleClient); the handler then touches no state. gRPC's standard
// health service is not checked: the kubelet's probes carry no version.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_RPC_PROTOCOL_H_
#define SHARDPS_RPC_PROTOCOL_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "grpcpp/client_context.h"

namespace shardps {

// Lower case, as HTTP/2 header names must be.
inline constexpr char kProtocolMetadataKey[] = "shardps-protocol";

// Initial metadata of a ps's PullRows / PushRows replies ("1") when it reads the requests'
// ids_bytes field (proto/ps.proto): a client sends raw ids only to a ps that has said so, so
// that a ps of an earlier release, which would see no ids, never gets them.
inline constexpr char kRowIdsBytesMetadataKey[] = "shardps-row-ids-bytes";

// Initial metadata of the same replies ("1") when the ps serves PullRowsBatch and
// PushRowsBatch: a client batches a step's row calls to a ps only once it has said so, and
// sends one call per item to a ps of an earlier release.
inline constexpr char kRowBatchesMetadataKey[] = "shardps-row-batches";

// Adds kProtocolMetadataKey: LocalProtocol() to the call's initial metadata. Before the call;
// every call's context needs it (the client library, the chief's worker and ps calls, the
// evaluator's and shardctl's calls), and a call without it is refused, so a forgotten one
// shows at once. (A client interceptor would attach it by itself, at a cost on every call.)
void AttachProtocolVersion(grpc::ClientContext* ctx);

// OK when the call's client speaks a protocol compatible with this process's; else
// FAILED_PRECONDITION (PROTOCOL_MISMATCH) naming both and ctx.peer(). `daemon` names this
// side ("ps", "worker", "chief").
absl::Status CheckClientProtocol(const grpc::CallbackServerContext& ctx, absl::string_view daemon);

// Null when CheckClientProtocol is OK; else ctx's default reactor, finished with that error,
// for the handler to return. Every handler of a shardps service starts with
//   if (auto* rejected = RejectIncompatibleClient(ctx, "ps")) return rejected;
grpc::ServerUnaryReactor* RejectIncompatibleClient(grpc::CallbackServerContext* ctx,
                                                   absl::string_view daemon);

}  // namespace shardps

#endif  // SHARDPS_RPC_PROTOCOL_H_
