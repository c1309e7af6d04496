// ShardPulls: the store's reads (ShardStore::Pull, PullBatch, PullRows, PullRowsBatch):
// checks a pull against its shard and the reply limit, then copies (or shares) its bytes
// under the shard's lock, now or, for a pull with a min_version the shard has not reached,
// when an update reaches it (PullWaits). ShardStore documents each call's contract.
//
// Thread-safety: thread-safe. `done` runs exactly once, holding no store or shard lock;
// std::bad_alloc never escapes (RESOURCE_EXHAUSTED).
#ifndef SHARDPS_PS_SERVER_SHARD_PULLS_H_
#define SHARDPS_PS_SERVER_SHARD_PULLS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"
#include "ps_server/pull_waits.h"
#include "ps_server/pulled_bytes.h"
#include "ps_server/shard_map.h"

namespace shardps {

class ShardPulls {
 public:
  using DoneCallback = std::function<void(const absl::Status&)>;

  // Pulls whose reply would pass max_reply_bytes (0: no limit) fail with RESOURCE_EXHAUSTED
  // (ErrorDetail LIMIT naming ps task `task_index`). `shards` and `waits` must outlive this.
  ShardPulls(const ShardMap* shards, PullWaits* waits, int task_index, int64_t max_reply_bytes)
      : shards_(shards),
        waits_(waits),
        task_index_(task_index),
        max_reply_bytes_(max_reply_bytes) {}

  // in_place null: the bytes go to the response's data; else they stay in the shard's
  // blocks and are appended to *in_place.
  void Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
            DoneCallback done);
  void PullBatch(const PullBatchRequest& request, std::vector<PullResponse>* responses,
                 std::vector<PulledBytes>* in_place, DoneCallback done);
  void PullRows(const PullRowsRequest& request, PullRowsResponse* response, DoneCallback done);
  void PullRowsBatch(const PullRowsBatchRequest& request,
                     absl::Span<PullRowsResponse* const> responses, DoneCallback done);

 private:
  // A batch of `items` pulls answered as one: `check` (run guarded, as `what`) vets the whole
  // batch; then start(i, finish) starts item i, and `done` runs once, after every item has
  // finished, with the first error.
  void FanOut(absl::string_view what, int items, const std::function<absl::Status()>& check,
              DoneCallback done, const std::function<void(int, DoneCallback)>& start);
  // Start a pull: fill the response now, or register a waiter (then *pending is true and
  // `*done` has been taken), or fail.
  absl::Status StartPull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
                         const std::string& what, DoneCallback* done, bool* pending);
  absl::Status StartPullRows(const PullRowsRequest& request, PullRowsResponse* response,
                             const std::string& what, DoneCallback* done, bool* pending);
  // RESOURCE_EXHAUSTED when `count` rows of `width` floats would pass max_reply_bytes (or
  // overflow).
  absl::Status CheckReplyBytes(int64_t count, int64_t width, absl::string_view what) const;
  absl::Status ReplyTooLarge(absl::string_view what, absl::string_view bytes) const;

  const ShardMap* const shards_;
  PullWaits* const waits_;
  const int task_index_;
  const int64_t max_reply_bytes_;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_PULLS_H_
