// The wire protocol's version on every RPC (common/protocol_version.h says what it means).
//
// Clients: every call's context gets AttachProtocolVersion, which adds this process's range as
// the gRPC metadata kProtocolMetadataKey (the client library, the chief's worker and ps
// calls, the evaluator's and shardctl's calls all do). A call without it is refused, loudly,
// so a forgotten one shows at once. (A client interceptor on NewChannel's channels would do
// it for every call by itself, but gRPC's interception machinery cost about 30 us per call
// here: a 4-byte pull went from 1.08x to 1.24x a bare gRPC echo.)
//
// Services: every handler of a shardps service starts with
//
//   if (auto* rejected = RejectIncompatibleClient(ctx, "ps")) return rejected;
//
// which finishes the call with FAILED_PRECONDITION (detail PROTOCOL_MISMATCH) naming both
// versions and the caller's address when the caller's range does not overlap this process's,
// or when the call carries no version (not a shardps client, or one from before versions);
// the handler then touches no state. gRPC's standard health service is not checked: the
// kubelet's probes carry no version.
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

// Adds kProtocolMetadataKey: LocalProtocol() to the call's initial metadata. Before the call.
void AttachProtocolVersion(grpc::ClientContext* ctx);

// OK when the call's client speaks a protocol compatible with this process's; else
// FAILED_PRECONDITION (PROTOCOL_MISMATCH) naming both and ctx.peer(). `daemon` names this
// side ("ps", "worker", "chief").
absl::Status CheckClientProtocol(const grpc::CallbackServerContext& ctx, absl::string_view daemon);

// Null when CheckClientProtocol is OK; else ctx's default reactor, finished with that error,
// for the handler to return.
grpc::ServerUnaryReactor* RejectIncompatibleClient(grpc::CallbackServerContext* ctx,
                                                   absl::string_view daemon);

}  // namespace shardps

#endif  // SHARDPS_RPC_PROTOCOL_H_
