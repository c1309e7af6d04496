// The one place every call of a shardps service passes through before its handler touches
// anything: who is calling and may it make this call (rpc/auth.h, rpc/access.h), then does it
// speak this process's protocol (rpc/protocol.h). gRPC 1.51's C++ server interceptors cannot
// end a call with a status, and its authorization-policy providers do not link against
// Debian 12's gRPC, so each handler starts with
//
//   if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Push")) {
//     return rejected;
//   }
//
// A refused call gets UNAUTHENTICATED (no identity, an unknown token, a certificate naming no
// role), PERMISSION_DENIED (a role the table does not allow, or a method without a row) or
// FAILED_PRECONDITION (PROTOCOL_MISMATCH), changes nothing, and leaves a log line naming the
// caller and the call (at most kDeniedLinesPerSecond a second; the rest are counted in the
// next line). Every call of an audited method (access.h) is logged with its caller, repeats of
// the same call by the same caller folded into a count (rpc/audit_lines.h).
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_RPC_CALL_GATE_H_
#define SHARDPS_RPC_CALL_GATE_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "rpc/auth.h"

namespace shardps {

inline constexpr int kDeniedLinesPerSecond = 10;

// The caller's identity when it may make the call; else the refusal, logged.
absl::StatusOr<CallerIdentity> CheckCall(const grpc::CallbackServerContext& ctx,
                                         absl::string_view daemon, absl::string_view service,
                                         absl::string_view method);

// Null when CheckCall is OK; else ctx's default reactor, finished with its error, for the
// handler to return.
grpc::ServerUnaryReactor* AdmitCall(grpc::CallbackServerContext* ctx, absl::string_view daemon,
                                    absl::string_view service, absl::string_view method);

}  // namespace shardps

#endif  // SHARDPS_RPC_CALL_GATE_H_
