#include "ps_server/shard_testing.h"

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(ShardTestingTest, MakesTheShardsOfItsSpecs) {
  std::shared_ptr<Shard> dense = MakeTestShard(DenseTestSpec("w", 3, 2, OptimizerSpec::SGD, 2));
  ASSERT_NE(dense, nullptr);
  EXPECT_EQ(dense->rows(), 3);
  EXPECT_EQ(dense->width(), 2);
  EXPECT_TRUE(dense->sync());
  EXPECT_EQ(dense->spec().variable(), "v");
  std::shared_ptr<Shard> dynamic = MakeTestShard(DynamicTestSpec("t", 4));
  ASSERT_NE(dynamic, nullptr);
  EXPECT_TRUE(dynamic->dynamic());
  EXPECT_EQ(dynamic->width(), 4);
  absl::MutexLock lock(&dynamic->mu());
  EXPECT_EQ(dynamic->version(), 0);
}

}  // namespace
}  // namespace shardps
