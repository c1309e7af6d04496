#include "client/ps_call_error.h"

#include "common/error_detail.h"

namespace shardps {

absl::Status PsCallError(const absl::Status& status, const PsCall& call) {
  if (status.ok()) return status;
  absl::Status annotated = Annotate(status, call.ps_name);
  if (GetDetail(annotated).has_value()) return annotated;
  const absl::StatusCode code = status.code();
  if (code == absl::StatusCode::kUnavailable ||
      (code == absl::StatusCode::kDeadlineExceeded && call.deadline_passed)) {
    return WithDetail(std::move(annotated), ErrorDetail::PS_UNAVAILABLE, call.ps_task);
  }
  if (code == absl::StatusCode::kNotFound && call.layout_shards) {
    return WithDetail(std::move(annotated), ErrorDetail::PS_STATE_LOST, call.ps_task);
  }
  return annotated;
}

}  // namespace shardps
