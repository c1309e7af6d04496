#include "ps_server/shard_info.h"

#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

TEST(ShardInfoTest, NamesTheVariableAndTheShard) {
  ShardSpec spec = DenseTestSpec("v/part_1", 2, 2);
  EXPECT_EQ(VariableOf(spec), "v");
  EXPECT_EQ(VariableAndShard(spec), "variable 'v' (shard 'v/part_1')");
  spec.set_variable("");
  EXPECT_EQ(VariableOf(spec), "v/part_1");
  EXPECT_EQ(VariableAndShard(spec), "shard 'v/part_1'");
}

TEST(ShardInfoTest, DynamicStatsOnlyForDynamicTables) {
  ShardInfo info;
  FillDynamicStats(*MakeTestShard(DenseTestSpec("w", 2, 2)), &info);
  EXPECT_FALSE(info.has_dynamic());
  FillDynamicStats(*MakeTestShard(DynamicTestSpec("t", 4)), &info);
  ASSERT_TRUE(info.has_dynamic());
  EXPECT_EQ(info.dynamic().rows(), 0);
  EXPECT_EQ(info.bytes(), info.dynamic().index_bytes() + info.dynamic().arena_bytes());
}

}  // namespace
}  // namespace shardps
