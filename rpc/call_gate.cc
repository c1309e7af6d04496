#include "rpc/call_gate.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "rpc/access.h"
#include "rpc/audit_lines.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

// "PsService.Shutdown" from "shardps.PsService", "Shutdown".
std::string CallName(absl::string_view service, absl::string_view method) {
  const size_t dot = service.rfind('.');
  return absl::StrCat(dot == absl::string_view::npos ? service : service.substr(dot + 1), ".",
                      method);
}

// How many refusal lines this second, and how many were not written.
struct DeniedLines {
  absl::Mutex mu;
  int64_t second ABSL_GUARDED_BY(mu) = 0;
  int lines ABSL_GUARDED_BY(mu) = 0;
  int64_t suppressed ABSL_GUARDED_BY(mu) = 0;
};

// Logs a refusal, at most kDeniedLinesPerSecond a second.
void LogDenied(const grpc::CallbackServerContext& ctx, absl::string_view daemon,
               const std::string& call, const absl::Status& status) {
  static auto* const denied = new DeniedLines();
  int64_t dropped = 0;
  {
    absl::MutexLock lock(&denied->mu);
    const int64_t now = absl::ToUnixSeconds(absl::Now());
    if (now != denied->second) {
      denied->second = now;
      denied->lines = 0;
    }
    if (denied->lines >= kDeniedLinesPerSecond) {
      ++denied->suppressed;
      return;
    }
    ++denied->lines;
    dropped = denied->suppressed;
    denied->suppressed = 0;
  }
  LogWarning() << "denied " << call << " on this " << daemon << " to " << ctx.peer() << ": "
               << absl::StatusCodeToString(status.code()) << ": " << status.message()
               << (dropped > 0 ? absl::StrCat(" (", dropped, " more refusals not logged)") : "");
}

}  // namespace

absl::StatusOr<CallerIdentity> CheckCall(const grpc::CallbackServerContext& ctx,
                                         absl::string_view daemon, absl::string_view service,
                                         absl::string_view method) {
  const MethodAccess* access = FindMethodAccess(service, method);
  absl::StatusOr<CallerIdentity> caller = IdentifyCaller(ctx);
  absl::Status refusal;
  if (access == nullptr) {
    // A method without a row in rpc/access.cc is open to nobody (access_test catches it).
    refusal = absl::PermissionDeniedError(absl::StrCat(
        CallName(service, method), " has no row in the roles table: nobody may call it"));
  } else if (!caller.ok()) {
    refusal = caller.status();
  } else if (caller->role.has_value() && !access->roles.Contains(*caller->role)) {
    refusal = absl::PermissionDeniedError(
        absl::StrCat("role ", RoleName(*caller->role), " (", caller->source, ") may not call ",
                     CallName(service, method), " on a ", daemon, ": it is for ",
                     access->roles.ToString()));
  }
  if (!refusal.ok()) {
    LogDenied(ctx, daemon, CallName(service, method), refusal);
    return refusal;
  }
  if (absl::Status protocol = CheckClientProtocol(ctx, daemon); !protocol.ok()) return protocol;
  if (access->audited) {
    static auto* const audit = new AuditLines();
    const std::string who = absl::StrCat(
        CallName(service, method), " on this ", daemon, " by ",
        caller->role.has_value()
            ? absl::StrCat(RoleName(*caller->role), " (", caller->source, ")")
            : std::string("an unidentified caller (roles off)"),
        " from ");
    const std::string peer = ctx.peer();
    for (const std::string& l :
         audit->Add(absl::StrCat(who, PeerHost(peer)), who + peer, absl::Now())) {
      LogInfo() << "audit: " << l;
    }
  }
  return caller;
}

grpc::ServerUnaryReactor* AdmitCall(grpc::CallbackServerContext* ctx, absl::string_view daemon,
                                    absl::string_view service, absl::string_view method) {
  absl::StatusOr<CallerIdentity> caller = CheckCall(*ctx, daemon, service, method);
  if (caller.ok()) return nullptr;
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(caller.status()));
  return reactor;
}

}  // namespace shardps
