// ShardPushes: the store's updates (ShardStore::Push, PushBatch, PushRows, PushRowsBatch,
// Assign): checks an update against its shard, then, under the shard's lock, the generation
// fence, the duplicate request, the SYNC step and the base version, applies it (ASYNC, with
// the shard's staleness policy) or adds it to the step (SYNC), and completes the pulls its
// new version releases. ShardStore documents each call's contract.
//
// Thread-safety: thread-safe. std::bad_alloc never escapes (RESOURCE_EXHAUSTED; the update
// then changed nothing).
#ifndef SHARDPS_PS_SERVER_SHARD_PUSHES_H_
#define SHARDPS_PS_SERVER_SHARD_PUSHES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"
#include "ps_server/generation_fence.h"
#include "ps_server/gradient_bytes.h"
#include "compute/parallel_for.h"
#include "ps_server/pull_waits.h"
#include "ps_server/shard.h"
#include "ps_server/shard_map.h"

namespace shardps {

class ShardPushes {
 public:
  // Large ASYNC updates are split over `parallel`'s threads. Every pointer must outlive this.
  ShardPushes(const ShardMap* shards, const GenerationFence* fence, PullWaits* waits,
              ParallelFor* parallel)
      : shards_(shards), fence_(fence), waits_(waits), parallel_(parallel) {}

  // The gradient is `data` (request.data() is ignored).
  absl::Status Push(const PushRequest& request, absl::string_view data, PushResponse* response);
  // The batch's bytes are the concatenation of `pieces` (request.data() is ignored).
  absl::Status PushBatch(const PushBatchRequest& request,
                         absl::Span<const absl::string_view> pieces, PushBatchResponse* response);
  absl::Status PushRows(const PushRowsRequest& request, PushRowsResponse* response);
  absl::Status PushRowsBatch(const PushRowsBatchRequest& request, PushRowsBatchResponse* response);
  absl::Status Assign(const AssignRequest& request, AssignResponse* response);

 private:
  absl::Status PushBatchChecked(const PushBatchRequest& request,
                                absl::Span<const absl::string_view> pieces,
                                PushBatchResponse* response);
  // A dense push whose gradient is read where it lies (one buffer, or a batch's pieces).
  absl::Status PushDense(const PushRequest& request, const GradientBytes& grad,
                         PushResponse* response);
  absl::Status PushRowsChecked(const PushRowsRequest& request, PushRowsResponse* response);
  absl::Status AssignChecked(const AssignRequest& request, AssignResponse* response);

  // What every gradient push does under the shard's lock: the generation fence, the
  // duplicate answer, a sync shard's step check, the base version's check, then `apply`
  // (which adds the gradient to a sync step or applies it), its record, and the pulls its
  // new version releases. `apply` runs under the lock; an error from it leaves the shard
  // unchanged.
  template <typename Request, typename Response, typename Apply>
  absl::Status ApplyGradient(Shard& shard, const Request& request, const std::string& what,
                             Response* response, Apply apply);

  const ShardMap* const shards_;
  const GenerationFence* const fence_;
  PullWaits* const waits_;
  ParallelFor* const parallel_;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_PUSHES_H_
