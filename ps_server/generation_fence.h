// GenerationFence: the ps task's recovery generation. It only rises (SetGeneration, Restore);
// every mutating request and every snapshot names the generation it belongs to and is
// checked against it under its shard's lock, so that an update racing with a Restore either
// lands before the shard is replaced or is refused, never on the restored state.
//
// A lower generation is a request from the timeline a rollback left: ABORTED with
// ErrorDetail STALE_GENERATION; a higher one means this ps missed a SetGeneration (it
// restarted, say) and so lacks the job's state: FAILED_PRECONDITION with ErrorDetail
// PS_STATE_LOST. Raising the generation fails the pulls then waiting for a version (they
// belong to steps of the timeline being left) with that same ABORTED.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_PS_SERVER_GENERATION_FENCE_H_
#define SHARDPS_PS_SERVER_GENERATION_FENCE_H_

#include <atomic>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ps_server/pull_waits.h"
#include "ps_server/shard.h"
#include "ps_server/shard_map.h"

namespace shardps {

class GenerationFence {
 public:
  // `shards` and `waits` must outlive this.
  GenerationFence(int task_index, uint64_t incarnation, const ShardMap* shards, PullWaits* waits)
      : task_index_(task_index), incarnation_(incarnation), shards_(shards), waits_(waits) {}

  int64_t current() const { return generation_.load(std::memory_order_acquire); }

  // Raises the generation to `generation` when that is higher; returns the generation after.
  // When it rises, every pull waiting for a version fails at once (ABORTED,
  // STALE_GENERATION) instead of holding a worker's step until the new timeline happens to
  // reach its version or it times out.
  int64_t Raise(int64_t generation);

  // Before a mutating request changes anything: the shard is still in the store (else
  // NOT_FOUND), and `generation` is the store's, or 0 (unfenced).
  absl::Status CheckUpdate(const Shard& shard, int64_t generation, absl::string_view what) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu());
  // A snapshot belongs to the store's generation exactly (0 is not exempt).
  absl::Status CheckSnapshot(int64_t generation, absl::string_view what) const;

  // ABORTED with ErrorDetail STALE_GENERATION: `what` belongs to `generation`, which the ps
  // has left for `current` (a rollback happened since); it changes nothing.
  absl::Status Stale(absl::string_view what, int64_t generation, int64_t current) const;

 private:
  absl::Status Ahead(absl::string_view what, int64_t generation, int64_t current) const;

  const int task_index_;
  const uint64_t incarnation_;
  const ShardMap* const shards_;
  PullWaits* const waits_;
  std::atomic<int64_t> generation_{0};  // only rises
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_GENERATION_FENCE_H_
