// Routing row pushes again after a dynamic table's buckets moved (docs/elastic.md): a ps
// refuses a push routed by an older layout than its shard's (ABORTED, ErrorDetail
// BUCKET_MOVED, naming the first batch item it refused); the client rebuilds the table's
// layout and sends the rows of every request that was not applied again, routed by the new
// layout. Those requests' keys are merged and split by the shards that hold them now: one
// request per shard for a SYNC push (a shard takes a replica's share of a step as one push,
// so a shard whose request was refused gets one again even when it is empty), requests of at
// most `max_rows` rows otherwise. The requests that were applied are not sent again.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_CLIENT_BUCKET_REROUTE_H_
#define SHARDPS_CLIENT_BUCKET_REROUTE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/variable_layout.h"
#include "proto/ps.pb.h"

namespace shardps {

// The refusal of a push routed by a layout the table has left, or of a key whose bucket moved.
bool IsBucketMoved(const absl::Status& status);
// Whether it says to wait a little first (the bucket is being handed over).
bool IsBucketMoving(const absl::Status& status);
// The first item of a batch of `items` that the refusal says was not applied (0 when it
// names none).
int FirstUnapplied(const absl::Status& status, int items);

// `unapplied` (row pushes to shards of `layout`'s table, each with ids_bytes and its rows,
// in any order) routed by `layout`: (ps, request) pairs with the layout's routing version,
// each request's id from id_for(shard name, chunk). A request's other fields (sync tag,
// generation, step) are those of the first unapplied request; its base version that of the
// unapplied request to the same shard, else 0. INVALID_ARGUMENT for a malformed request.
absl::StatusOr<std::vector<std::pair<int, PushRowsRequest>>> RerouteRowPushes(
    const std::vector<const PushRowsRequest*>& unapplied, const VariableLayout& layout,
    bool sync, int64_t max_rows,
    const std::function<uint64_t(const std::string& shard, int64_t chunk)>& id_for);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_BUCKET_REROUTE_H_
