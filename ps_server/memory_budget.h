// MemoryBudget: how much of the ps' memory its shards' parameters and optimizer slots may
// take. CreateShards reserves a shard's bytes before it allocates anything, so that a job
// too large for the ps fails at once with a message naming the variable and the bytes,
// instead of the process dying on an allocation (or being killed by the kernel) later.
//
// The budget keeps `snapshot_reserve` of itself free: while a checkpoint snapshot is being
// written, every block an update touches is copied (the snapshot keeps the old bytes), so up
// to that much more memory may be in use for a while.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_PS_SERVER_MEMORY_BUDGET_H_
#define SHARDPS_PS_SERVER_MEMORY_BUDGET_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

class MemoryBudget {
 public:
  // budget_bytes 0: no budget (every reservation succeeds). REQUIRES: budget_bytes >= 0,
  // 0 <= snapshot_reserve < 1.
  MemoryBudget(int64_t budget_bytes, double snapshot_reserve, int ps_task);

  // Checks the arguments of the constructor: INVALID_ARGUMENT naming the option.
  static absl::Status Validate(int64_t budget_bytes, double snapshot_reserve);

  int64_t budget_bytes() const { return budget_bytes_; }
  // What parameters and slots may take: budget_bytes * (1 - snapshot_reserve); 0 without a
  // budget.
  int64_t limit_bytes() const { return limit_bytes_; }

  // Reserves `bytes` for `what` ("variable 'v' (shard 'v/part_0')"), or fails with
  // RESOURCE_EXHAUSTED and ErrorDetail LIMIT ("--memory_budget_bytes"), naming `what`, the
  // bytes needed and the bytes available, changing nothing.
  absl::Status Reserve(int64_t bytes, absl::string_view what);
  // Returns bytes reserved before (a shard dropped, or one not created after all).
  void Release(int64_t bytes);
  // Counts `bytes` already taken, past the limit if need be (a dynamic table's rows that
  // racing pushes made without a reservation): available_bytes() says so at once.
  void Charge(int64_t bytes);

  int64_t used_bytes() const;
  // limit_bytes() - used_bytes(), at least 0; 0 without a budget.
  int64_t available_bytes() const;

 private:
  const int64_t budget_bytes_;
  const double snapshot_reserve_;
  const int64_t limit_bytes_;
  const int ps_task_;
  mutable absl::Mutex mu_;
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
};

// Memory reserved in a budget for one request, returned when the request does not keep it.
//
// Thread-safety: not thread-safe (one request's).
class BudgetReservation {
 public:
  explicit BudgetReservation(MemoryBudget* budget) : budget_(budget) {}
  // Releases what was added and not kept.
  ~BudgetReservation() { budget_->Release(bytes_); }
  BudgetReservation(const BudgetReservation&) = delete;
  BudgetReservation& operator=(const BudgetReservation&) = delete;

  // Reserves `bytes` more for `what` (MemoryBudget::Reserve).
  absl::Status Add(int64_t bytes, absl::string_view what);
  // Keeps `bytes` of what was added reserved past this reservation's end.
  void Keep(int64_t bytes) { bytes_ -= bytes; }

 private:
  MemoryBudget* const budget_;
  int64_t bytes_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_MEMORY_BUDGET_H_
