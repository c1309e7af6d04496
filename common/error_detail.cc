#include "common/error_detail.h"

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace shardps {

absl::Status WithDetail(absl::Status status, const ErrorDetail& detail) {
  if (status.ok()) return status;
  status.SetPayload(kErrorDetailUrl, absl::Cord(detail.SerializeAsString()));
  return status;
}

absl::Status WithDetail(absl::Status status, ErrorDetail::Kind kind, int ps_task) {
  ErrorDetail detail;
  detail.set_kind(kind);
  detail.set_ps_task(ps_task);
  return WithDetail(std::move(status), detail);
}

std::optional<ErrorDetail> GetDetail(const absl::Status& status) {
  auto payload = status.GetPayload(kErrorDetailUrl);  // absl::optional here
  if (!payload.has_value()) return std::nullopt;
  ErrorDetail detail;
  if (!detail.ParseFromString(std::string(*payload))) return std::nullopt;
  return detail;
}

ErrorDetail::Kind DetailKind(const absl::Status& status) {
  std::optional<ErrorDetail> detail = GetDetail(status);
  return detail.has_value() ? detail->kind() : ErrorDetail::UNSPECIFIED;
}

absl::Status Annotate(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  absl::Status annotated(status.code(), absl::StrCat(prefix, ": ", status.message()));
  status.ForEachPayload([&annotated](absl::string_view url, const absl::Cord& payload) {
    annotated.SetPayload(url, payload);
  });
  return annotated;
}

}  // namespace shardps
