// What the store says about a shard: its variable's name, how messages name it, and a
// dynamic table's statistics in its ShardInfo (ListShards, Snapshot, Restore).
//
// Thread-safety: functions; FillDynamicStats takes the shard's lock itself.
#ifndef SHARDPS_PS_SERVER_SHARD_INFO_H_
#define SHARDPS_PS_SERVER_SHARD_INFO_H_

#include <string>

#include "proto/ps.pb.h"
#include "ps_server/shard.h"

namespace shardps {

// The variable a shard belongs to: spec.variable, or its name when that is empty.
const std::string& VariableOf(const ShardSpec& spec);

// "variable 'v' (shard 'v/part_1')", or "shard 'v'" for an unsplit variable.
std::string VariableAndShard(const ShardSpec& spec);

// A dynamic shard's statistics (and its memory now as its bytes); nothing for another shard.
// REQUIRES: the shard's lock not held.
void FillDynamicStats(const Shard& shard, ShardInfo* info);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_INFO_H_
