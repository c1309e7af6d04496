// BucketMoves: a dynamic shard's side of moving buckets between the shards of its table while
// training goes on (MoveBucketsRequest in proto/ps.proto; the mover is client/bucket_mover.h;
// docs/elastic.md). It keeps the range of buckets the shard serves, the buckets it is
// handing over (frozen: their pushes are refused, their pulls served) or taking over (staged:
// their rows are in the table but not served), the table's routing version, and where recent
// buckets went, and it checks requests against them: a key outside the range, a push to a
// frozen bucket, or a push routed by an older routing version than the shard's is refused
// with ABORTED and ErrorDetail BUCKET_MOVED, changing nothing.
//
// Thread-safety: none; the shard's lock guards it (Shard::moves()).
#ifndef SHARDPS_PS_SERVER_BUCKET_MOVES_H_
#define SHARDPS_PS_SERVER_BUCKET_MOVES_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "partitioners/buckets.h"
#include "proto/ps.pb.h"
#include "ps_server/dynamic_table.h"

namespace shardps {

// What a MoveBuckets call changed on the shard, for the shard to follow up.
struct BucketMoveOutcome {
  bool range_changed = false;  // ACTIVATE, DROP: the next checkpoint must be whole
};

class BucketMoves {
 public:
  // `variable` names the table in errors; `range` is the one the shard was created with.
  BucketMoves(std::string variable, int32_t num_buckets, BucketRange range);

  BucketRange range() const { return range_; }
  int64_t routing_version() const { return routing_version_; }
  // Buckets staged here now (empty: none): a checkpoint leaves their rows out.
  BucketRange staged() const { return staged_; }

  // The keys of a pull (push: false) or a push routed by `routing_version`, at `now`.
  absl::Status Check(absl::Span<const int64_t> keys, bool push, int64_t routing_version,
                     absl::Time now, absl::string_view what);

  // One step of a move (MoveBucketsRequest.op) on `table`. `step_in_progress`: a SYNC step is
  // partly pushed (freezing, activating and dropping wait for a step boundary).
  // INVALID_ARGUMENT for a malformed request, FAILED_PRECONDITION for one the shard's state
  // refuses; either changes nothing.
  absl::StatusOr<BucketMoveOutcome> Apply(const MoveBucketsRequest& request, DynamicTable* table,
                                          bool step_in_progress, absl::Time now,
                                          MoveBucketsResponse* response);

  // A shard added to a table whose shards have moved buckets: it starts at their routing
  // version.
  void StartAt(int64_t routing_version) { routing_version_ = routing_version; }

  // The table was replaced (a restore): staged and frozen buckets are forgotten; the range
  // and the routing version stay.
  void TableReplaced();

 private:
  struct Moved {
    BucketRange buckets;
    int32_t to_ps;
    int64_t routing_version;
  };
  absl::Status Refuse(int32_t bucket, absl::string_view what, bool moving) const;
  bool Frozen(absl::Time now);

  const std::string variable_;
  const int32_t num_buckets_;
  BucketRange range_;
  int64_t routing_version_ = 0;
  BucketRange frozen_;  // empty: none
  absl::Time frozen_until_;
  BucketRange staged_;  // empty: none
  std::deque<Moved> moved_;  // the latest few, newest last
};

// Rows as MoveBuckets carries them (little-endian keys, last steps, values).
void EncodeRows(const RowBatch& rows, std::string* keys, std::string* last_steps,
                std::string* values);
// INVALID_ARGUMENT naming the field when the sizes do not agree with `row_floats`.
absl::StatusOr<RowBatch> DecodeRows(const std::string& keys, const std::string& last_steps,
                                    const std::string& values, int64_t row_floats);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_BUCKET_MOVES_H_
