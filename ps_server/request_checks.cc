#include "ps_server/request_checks.h"

#include <cstdint>
#include <cstring>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardps {

absl::StatusOr<RowRange> ResolveRange(const Shard& shard, int64_t begin, int64_t end,
                                      absl::string_view what) {
  if (shard.dynamic()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", QuotedShard(shard.name()),
        " is a dynamic table: it has no row ranges; read and write it by key (PullRows, "
        "PushRows)"));
  }
  const int64_t resolved_end = end == 0 ? shard.rows() : end;
  if (begin < 0 || begin >= resolved_end || resolved_end > shard.rows()) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": row range [", begin, ", ", end, ") is not within the shard's ", shard.rows(),
        " rows (need 0 <= row_begin < row_end <= ", shard.rows(), "; row_end 0 means the end)"));
  }
  return RowRange{begin, resolved_end};
}

absl::StatusOr<absl::Span<const int64_t>> RequestIds(
    const google::protobuf::RepeatedField<int64_t>& ids, const std::string& ids_bytes,
    absl::string_view what, std::vector<int64_t>* scratch) {
  static_assert(ABSL_IS_LITTLE_ENDIAN, "ids_bytes holds little-endian int64s");
  if (ids_bytes.empty()) return absl::MakeConstSpan(ids.data(), static_cast<size_t>(ids.size()));
  if (!ids.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": both ids (", ids.size(),
                                                   " ids) and ids_bytes (", ids_bytes.size(),
                                                   " bytes) are set; set one"));
  }
  if (ids_bytes.size() % sizeof(int64_t) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ids_bytes has ", ids_bytes.size(),
                     " bytes, not a multiple of 8 (little-endian int64 ids)"));
  }
  const size_t n = ids_bytes.size() / sizeof(int64_t);
  if (reinterpret_cast<uintptr_t>(ids_bytes.data()) % alignof(int64_t) == 0) {
    return absl::MakeConstSpan(reinterpret_cast<const int64_t*>(ids_bytes.data()), n);
  }
  scratch->resize(n);
  std::memcpy(scratch->data(), ids_bytes.data(), ids_bytes.size());
  return absl::MakeConstSpan(*scratch);
}

absl::Status CheckIds(const Shard& shard, absl::Span<const int64_t> ids, absl::string_view what) {
  if (shard.dynamic()) return shard.CheckKeys(ids, what);
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= shard.rows()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ids[", k, "] = ", ids[k],
                                                     " is out of range; the shard has ",
                                                     shard.rows(), " rows"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckGradient(const GradientBytes& grad, int64_t floats, absl::string_view what,
                           absl::string_view field, float* max_abs) {
  const int64_t expected = floats * static_cast<int64_t>(sizeof(float));
  if (grad.size_bytes() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, " has ", grad.size_bytes(),
                                                   " bytes, expected ", expected, " (", floats,
                                                   " float32 values)"));
  }
  const int64_t bad = grad.FirstNonFinite(max_abs);
  if (bad < floats) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, "[", bad, "] is ",
                                                   grad.At(bad), "; values must be finite"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const float*> CheckedFloats(absl::string_view data, int64_t floats,
                                           absl::string_view what, absl::string_view field,
                                           std::vector<float>* scratch) {
  RETURN_IF_ERROR(CheckGradient(GradientBytes(data), floats, what, field));
  if (reinterpret_cast<uintptr_t>(data.data()) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(data.data());
  }
  scratch->resize(static_cast<size_t>(floats));
  if (floats > 0) std::memcpy(scratch->data(), data.data(), data.size());
  return scratch->data();
}

absl::Status CheckRequestId(uint64_t request_id, absl::string_view what) {
  if (request_id == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": request_id must be non-zero (it detects retried requests)"));
  }
  return absl::OkStatus();
}

absl::Status CheckReplica(const Shard& shard, const SyncTag& tag, absl::string_view what) {
  if (tag.replica() < 0 || tag.replica() >= shard.num_replicas()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": sync.replica ", tag.replica(),
                                                   " is not in [0, ", shard.num_replicas(), ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckTimeout(int64_t timeout_ms, absl::string_view what) {
  if (timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": wait_timeout_ms must be >= 0, got ", timeout_ms));
  }
  return absl::OkStatus();
}

}  // namespace shardps
