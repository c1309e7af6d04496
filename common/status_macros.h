// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status, which Debian 12's abseil lacks.
#ifndef SHARDPS_COMMON_STATUS_MACROS_H_
#define SHARDPS_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SHARDPS_CONCAT_INNER_(a, b) a##b
#define SHARDPS_CONCAT_(a, b) SHARDPS_CONCAT_INNER_(a, b)

// Returns the status from the enclosing function when `expr` is not OK.
#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status shardps_status_ = (expr);       \
    if (!shardps_status_.ok()) return shardps_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, MakeX());` declares x from the StatusOr's value, or returns its
// status.
#define ASSIGN_OR_RETURN(lhs, expr) \
  ASSIGN_OR_RETURN_IMPL_(SHARDPS_CONCAT_(shardps_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // SHARDPS_COMMON_STATUS_MACROS_H_
