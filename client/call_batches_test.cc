#include "client/call_batches.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

struct Batch {
  std::vector<int> chunks;
  int64_t bytes = 0;
};

TEST(CallBatchesTest, GroupsChunksByPsUpToTheBound) {
  CallBatches<Batch> batches(/*num_ps=*/2, /*max_bytes=*/100);
  batches.For(0, 60)->chunks.push_back(1);
  batches.For(1, 60)->chunks.push_back(2);
  batches.For(0, 40)->chunks.push_back(3);   // fills ps 0's batch
  batches.For(0, 1)->chunks.push_back(4);    // a new one
  batches.For(1, 500)->chunks.push_back(5);  // too large for the open one
  batches.For(1, 500)->chunks.push_back(6);  // a chunk alone may pass the bound
  EXPECT_EQ(batches.size(), 5u);
  auto all = batches.Take();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].first, 0);
  EXPECT_EQ(all[0].second->chunks, (std::vector<int>{1, 3}));
  EXPECT_EQ(all[0].second->bytes, 100);
  EXPECT_EQ(all[1].first, 1);
  EXPECT_EQ(all[1].second->chunks, std::vector<int>{2});
  EXPECT_EQ(all[2].second->chunks, std::vector<int>{4});
  EXPECT_EQ(all[3].second->chunks, std::vector<int>{5});
  EXPECT_EQ(all[4].second->chunks, std::vector<int>{6});
}

}  // namespace
}  // namespace shardps
