#include "coordinator/step_failure.h"

#include <optional>

#include "common/error_detail.h"

namespace shardps {

StepFailure ClassifyStepFailure(const absl::Status& status) {
  StepFailure failure;
  if (status.ok()) return failure;
  std::optional<ErrorDetail> detail = GetDetail(status);
  if (detail.has_value()) {
    switch (detail->kind()) {
      case ErrorDetail::PS_UNAVAILABLE:
        failure.kind = StepFailureKind::kPsUnavailable;
        failure.ps_task = detail->ps_task();
        return failure;
      case ErrorDetail::PS_STATE_LOST:
        failure.kind = StepFailureKind::kPsStateLost;
        failure.ps_task = detail->ps_task();
        return failure;
      case ErrorDetail::STALE_STEP:
      case ErrorDetail::STALE_GENERATION:
        failure.kind = StepFailureKind::kStale;
        return failure;
      case ErrorDetail::UNKNOWN_JOB:
        failure.kind = StepFailureKind::kUnknownJob;
        return failure;
      case ErrorDetail::PROTOCOL_MISMATCH:
        failure.kind = StepFailureKind::kIncompatible;
        return failure;
      default:
        break;  // a detail that does not change what the chief does: the code decides
    }
  }
  switch (status.code()) {
    case absl::StatusCode::kAborted:
      failure.kind = StepFailureKind::kStale;
      break;
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kInternal:
      // Any detail at all means a shardps process answered: not a transport failure.
      failure.kind =
          detail.has_value() ? StepFailureKind::kStepFailed : StepFailureKind::kWorkerDown;
      break;
    default:
      failure.kind = StepFailureKind::kStepFailed;
      break;
  }
  return failure;
}

const char* StepFailureKindName(StepFailureKind kind) {
  switch (kind) {
    case StepFailureKind::kNone:
      return "none";
    case StepFailureKind::kWorkerDown:
      return "worker down";
    case StepFailureKind::kPsUnavailable:
      return "ps unavailable";
    case StepFailureKind::kPsStateLost:
      return "ps state lost";
    case StepFailureKind::kStale:
      return "stale";
    case StepFailureKind::kUnknownJob:
      return "unknown job";
    case StepFailureKind::kIncompatible:
      return "incompatible protocol";
    case StepFailureKind::kStepFailed:
      return "step failed";
  }
  return "?";
}

}  // namespace shardps
