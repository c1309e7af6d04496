// The checks a ShardSpec passes before a shard of it is made (CreateShards): shape and
// placement, the dynamic table's options, the initializer, the optimizer and the update mode
// with its staleness policy; and how two specs of one name differ.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_PS_SERVER_SHARD_SPEC_CHECKS_H_
#define SHARDPS_PS_SERVER_SHARD_SPEC_CHECKS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "ps_server/shard.h"

namespace shardps {

// The shard's rows and row width, or INVALID_ARGUMENT naming the shard and the field at
// fault. A rank-0 variable is one row of width 1; a dynamic table's shard has 0 rows.
absl::StatusOr<Geometry> ValidateShardSpec(const ShardSpec& spec);

// The first difference between two specs ("modified: optimizer.learning_rate: 0.1 -> 0.2"),
// or "" when they are equal.
std::string FirstSpecDifference(const ShardSpec& a, const ShardSpec& b);

// OK when `wanted` equals the `existing` shard's spec, else ALREADY_EXISTS naming the shard
// and the first difference. Shards of a dynamic table are compared without their bucket range
// and part count (bucket moves and ps added live change the table's layout, not the shard).
absl::Status CheckSameSpec(const ShardSpec& existing, const ShardSpec& wanted);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_SPEC_CHECKS_H_
