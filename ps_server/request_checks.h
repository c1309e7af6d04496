// The checks a data request's fields pass against its shard before anything is read or
// changed: row ranges, row ids (packed or raw), gradients (size and finiteness), request ids,
// SYNC replicas and wait timeouts. Each failure is INVALID_ARGUMENT naming `what` (the
// request: "push to shard 'w'") and the field at fault; a dynamic table's keys are checked by
// the shard (FAILED_PRECONDITION for a key whose bucket it does not hold).
//
// Thread-safety: pure functions; the Shard's const accessors only (no lock needed).
#ifndef SHARDPS_PS_SERVER_REQUEST_CHECKS_H_
#define SHARDPS_PS_SERVER_REQUEST_CHECKS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/repeated_field.h"
#include "proto/ps.pb.h"
#include "ps_server/gradient_bytes.h"
#include "ps_server/shard.h"

namespace shardps {

// The rows [begin, end) of the shard (end 0: to its end). A dynamic table has no ranges.
absl::StatusOr<RowRange> ResolveRange(const Shard& shard, int64_t begin, int64_t end,
                                      absl::string_view what);

// A row request's ids: `ids_bytes` (raw little-endian int64s) when set, else the packed
// `ids`. Viewed in place when aligned (the usual case), else copied into `scratch`.
// INVALID_ARGUMENT naming the field when both are set or ids_bytes is not whole int64s.
absl::StatusOr<absl::Span<const int64_t>> RequestIds(
    const google::protobuf::RepeatedField<int64_t>& ids, const std::string& ids_bytes,
    absl::string_view what, std::vector<int64_t>* scratch);

// Every id within the shard's rows (a dynamic table's: keys of its buckets).
absl::Status CheckIds(const Shard& shard, absl::Span<const int64_t> ids, absl::string_view what);

// Checks that `grad` holds exactly `floats` finite float32 values; with `max_abs`, sets it to
// their largest magnitude, learnt in the same pass.
absl::Status CheckGradient(const GradientBytes& grad, int64_t floats, absl::string_view what,
                           absl::string_view field, float* max_abs = nullptr);

// As CheckGradient, for bytes in one buffer, and returns them as floats: viewed in place
// when aligned (the usual case) or copied into `scratch`.
absl::StatusOr<const float*> CheckedFloats(absl::string_view data, int64_t floats,
                                           absl::string_view what, absl::string_view field,
                                           std::vector<float>* scratch);

// A mutating request's id is non-zero (it detects retried requests).
absl::Status CheckRequestId(uint64_t request_id, absl::string_view what);

// A SYNC push's replica is in [0, num_replicas).
absl::Status CheckReplica(const Shard& shard, const SyncTag& tag, absl::string_view what);

// A pull's wait_timeout_ms is >= 0.
absl::Status CheckTimeout(int64_t timeout_ms, absl::string_view what);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_REQUEST_CHECKS_H_
