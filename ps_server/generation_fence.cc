#include "ps_server/generation_fence.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "proto/error.pb.h"

namespace shardps {

int64_t GenerationFence::Raise(int64_t generation) {
  int64_t current = generation_.load(std::memory_order_acquire);
  while (generation > current &&
         !generation_.compare_exchange_weak(current, generation, std::memory_order_acq_rel)) {
  }
  if (generation > current) {
    for (const std::shared_ptr<Shard>& shard : shards_->All()) {
      waits_->FailWaiters(*shard, [&] {
        return Stale(absl::StrCat("pull from ", QuotedShard(shard->name())), current, generation);
      });
    }
  }
  return std::max(current, generation);
}

absl::Status GenerationFence::CheckUpdate(const Shard& shard, int64_t generation,
                                          absl::string_view what) const {
  if (shard.dropped()) return shards_->NoSuchShard(what);
  if (generation == 0) return absl::OkStatus();
  const int64_t current = generation_.load(std::memory_order_acquire);
  if (generation < current) return Stale(what, generation, current);
  if (generation > current) return Ahead(what, generation, current);
  return absl::OkStatus();
}

absl::Status GenerationFence::CheckSnapshot(int64_t generation, absl::string_view what) const {
  const int64_t current = generation_.load(std::memory_order_acquire);
  if (generation < current) return Stale(what, generation, current);
  if (generation > current) return Ahead(what, generation, current);
  return absl::OkStatus();
}

absl::Status GenerationFence::Stale(absl::string_view what, int64_t generation,
                                    int64_t current) const {
  ErrorDetail detail;
  detail.set_kind(ErrorDetail::STALE_GENERATION);
  detail.set_ps_task(task_index_);
  detail.set_ps_incarnation(incarnation_);
  detail.set_generation(current);
  return WithDetail(
      absl::AbortedError(absl::StrCat(what, ": it belongs to generation ", generation,
                                      " but ps task ", task_index_, " is at generation ", current,
                                      " (rolled back since); nothing was changed")),
      detail);
}

absl::Status GenerationFence::Ahead(absl::string_view what, int64_t generation,
                                    int64_t current) const {
  // The caller's generation was set on every ps, this one included, unless it restarted
  // since (back at 0, its shards re-created empty or not at all) or missed the move: either
  // way it does not hold the job's state, as a restarted ps that answers NOT_FOUND does not.
  ErrorDetail detail;
  detail.set_kind(ErrorDetail::PS_STATE_LOST);
  detail.set_ps_task(task_index_);
  detail.set_ps_incarnation(incarnation_);
  detail.set_generation(current);
  return WithDetail(
      absl::FailedPreconditionError(
          absl::StrCat(what, ": it belongs to generation ", generation, ", ahead of ps task ",
                       task_index_, "'s generation ", current, "; set the generation first")),
      detail);
}

}  // namespace shardps
