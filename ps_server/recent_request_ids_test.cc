#include "ps_server/recent_request_ids.h"

#include <algorithm>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(RecentRequestIdsTest, EvictsTheOldestFirst) {
  RecentRequestIds ids(3);
  for (uint64_t id : {1, 2, 3}) ids.Insert(id);
  EXPECT_TRUE(ids.Contains(1));
  ids.Insert(4);
  EXPECT_FALSE(ids.Contains(1));
  for (uint64_t id : {2, 3, 4}) EXPECT_TRUE(ids.Contains(id)) << id;
  EXPECT_EQ(ids.size(), 3);
}

TEST(RecentRequestIdsTest, ARepeatedInsertDoesNotRefreshOrDoubleCount) {
  RecentRequestIds ids(2);
  ids.Insert(1);
  ids.Insert(1);
  EXPECT_EQ(ids.size(), 1);
  ids.Insert(2);
  ids.Insert(1);  // already there: 1 stays the oldest
  ids.Insert(3);
  EXPECT_FALSE(ids.Contains(1));
  EXPECT_TRUE(ids.Contains(2));
  EXPECT_TRUE(ids.Contains(3));
}

TEST(RecentRequestIdsTest, ZeroCapacityRemembersNothing) {
  RecentRequestIds ids(0);
  ids.Insert(7);
  EXPECT_FALSE(ids.Contains(7));
  EXPECT_EQ(ids.size(), 0);
}

TEST(RecentRequestIdsTest, ClearForgetsEverything) {
  RecentRequestIds ids(4);
  ids.Insert(1);
  ids.Insert(2);
  ids.Clear();
  EXPECT_FALSE(ids.Contains(1));
  EXPECT_FALSE(ids.Contains(2));
  EXPECT_EQ(ids.size(), 0);
  ids.Insert(1);
  EXPECT_TRUE(ids.Contains(1));
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// The ring grows as ids arrive and keeps their order through growth and wrap-around.
TEST(RecentRequestIdsTest, KeepsOrderThroughGrowthAndWrapAround) {
  RecentRequestIds ids(100);
  for (uint64_t id = 1; id <= 1000; ++id) {
    ids.Reserve();
    ids.Insert(id);
    ASSERT_EQ(ids.size(), std::min<int64_t>(static_cast<int64_t>(id), 100));
    const uint64_t oldest = id > 100 ? id - 99 : 1;
    ASSERT_TRUE(ids.Contains(oldest)) << id;
    ASSERT_TRUE(ids.Contains(id));
    if (oldest > 1) {
      ASSERT_FALSE(ids.Contains(oldest - 1)) << id;
    }
  }
}

}  // namespace
}  // namespace shardps
