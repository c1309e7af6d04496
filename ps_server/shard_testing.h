// Tests only: specs of small shards and the shards made from them, for the unit tests of
// the store's parts.
//
// Thread-safety: functions.
#ifndef SHARDPS_PS_SERVER_SHARD_TESTING_H_
#define SHARDPS_PS_SERVER_SHARD_TESTING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "proto/ps.pb.h"
#include "ps_server/shard.h"

namespace shardps {

// Shard `name` of variable `variable`: [rows, width], all of the variable, initialized to
// 1.0, optimized by `optimizer` with learning rate 0.5; SYNC over `sync_replicas` when > 0.
ShardSpec DenseTestSpec(const std::string& name, int64_t rows, int64_t width,
                        OptimizerSpec::Type optimizer = OptimizerSpec::SGD, int sync_replicas = 0,
                        const std::string& variable = "v");

// A dynamic table's only shard: [0, dim], every one of `num_buckets` buckets, Adagrad.
ShardSpec DynamicTestSpec(const std::string& name, int64_t dim, int num_buckets = 16);

// The shard of `spec` (validated first); fails the test and returns null when it is invalid.
std::shared_ptr<Shard> MakeTestShard(const ShardSpec& spec);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_TESTING_H_
