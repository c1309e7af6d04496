#include "ps_server/memory_budget.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "proto/error.pb.h"

namespace shardps {

absl::Status MemoryBudget::Validate(int64_t budget_bytes, double snapshot_reserve) {
  if (budget_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_budget_bytes must be >= 0 (0: no budget), got ", budget_bytes));
  }
  if (!(snapshot_reserve >= 0 && snapshot_reserve < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot_reserve must be in [0, 1), got ", snapshot_reserve));
  }
  return absl::OkStatus();
}

MemoryBudget::MemoryBudget(int64_t budget_bytes, double snapshot_reserve, int ps_task)
    : budget_bytes_(budget_bytes),
      snapshot_reserve_(snapshot_reserve),
      limit_bytes_(static_cast<int64_t>(
          std::floor(static_cast<double>(budget_bytes) * (1.0 - snapshot_reserve)))),
      ps_task_(ps_task) {}

absl::Status MemoryBudget::Reserve(int64_t bytes, absl::string_view what) {
  absl::MutexLock lock(&mu_);
  if (budget_bytes_ == 0 || bytes <= limit_bytes_ - used_) {
    used_ += bytes;
    return absl::OkStatus();
  }
  ErrorDetail detail;
  detail.set_kind(ErrorDetail::LIMIT);
  detail.set_ps_task(ps_task_);
  detail.set_limit("--memory_budget_bytes");
  return WithDetail(
      absl::ResourceExhaustedError(absl::StrCat(
          what, ": parameters and optimizer slots need ", bytes, " bytes; ps task ", ps_task_,
          " has ", std::max<int64_t>(0, limit_bytes_ - used_), " bytes available (",
          limit_bytes_, " of --memory_budget_bytes=", budget_bytes_,
          " after the --snapshot_reserve=", snapshot_reserve_, ", ", used_,
          " bytes in use); use more ps tasks or raise the budget")),
      detail);
}

void MemoryBudget::Release(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ -= bytes;
}

void MemoryBudget::Charge(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  used_ += bytes;
}

int64_t MemoryBudget::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

int64_t MemoryBudget::available_bytes() const {
  if (budget_bytes_ == 0) return 0;
  absl::MutexLock lock(&mu_);
  return std::max<int64_t>(0, limit_bytes_ - used_);
}

absl::Status BudgetReservation::Add(int64_t bytes, absl::string_view what) {
  RETURN_IF_ERROR(budget_->Reserve(bytes, what));
  bytes_ += bytes;
  return absl::OkStatus();
}

}  // namespace shardps
