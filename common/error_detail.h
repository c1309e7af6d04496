// Typed error details (proto/error.proto) on absl::Status: what a status code alone cannot
// tell a caller, such as which ps task failed or that an update belongs to a generation
// before a rollback. Callers decide by code and detail, never by message text.
//
// The detail is an absl::Status payload under kErrorDetailUrl; rpc/grpc_util.cc carries it
// across gRPC in the status' binary details, so a detail set by a ps survives a worker that
// relays the error to the chief. Annotate keeps payloads (prefixing a message with
// absl::Status(code, msg) alone would drop them).
//
// Thread-safety: pure functions.
#ifndef SHARDPS_COMMON_ERROR_DETAIL_H_
#define SHARDPS_COMMON_ERROR_DETAIL_H_

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/error.pb.h"

namespace shardps {

inline constexpr char kErrorDetailUrl[] = "type.googleapis.com/shardps.ErrorDetail";

// `status` with `detail` attached (replacing any earlier detail). OK stays OK.
absl::Status WithDetail(absl::Status status, const ErrorDetail& detail);

// Shorthand: a detail of just `kind` (and `ps_task`, when >= 0).
absl::Status WithDetail(absl::Status status, ErrorDetail::Kind kind, int ps_task = -1);

// The status' detail, if it carries one.
std::optional<ErrorDetail> GetDetail(const absl::Status& status);

// The detail's kind, UNSPECIFIED when there is none.
ErrorDetail::Kind DetailKind(const absl::Status& status);

// "prefix: message" with the same code and every payload of `status`. OK stays OK.
absl::Status Annotate(const absl::Status& status, absl::string_view prefix);

}  // namespace shardps

#endif  // SHARDPS_COMMON_ERROR_DETAIL_H_
