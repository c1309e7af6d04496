#include "client/request_ids.h"

#include <set>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(RequestIdsTest, FreshIdsAreDistinctAndNonZero) {
  RequestIds ids;
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t id = ids.Next();
    EXPECT_NE(id, 0u);
    EXPECT_TRUE(seen.insert(id).second);
  }
  PushOptions unkeyed;
  EXPECT_TRUE(seen.insert(ids.ForPush(unkeyed, "v", "v/part_0", 0)).second);
}

TEST(RequestIdsTest, KeyedIdsDependOnWhatTheRequestCoversOnly) {
  RequestIds a;
  RequestIds b;
  PushOptions options;
  options.idempotency_key = 42;
  const uint64_t id = a.ForPush(options, "v", "v/part_0", 8);
  // A fixed value: the ids must not change between releases (a ps of one release dedups a
  // retry sent by a client of the next).
  EXPECT_EQ(id, 16874038745397434752ULL);
  EXPECT_EQ(b.ForPush(options, "v", "v/part_0", 8), id);  // another client, the same id
  EXPECT_NE(a.ForPush(options, "v", "v/part_0", 9), id);
  EXPECT_NE(a.ForPush(options, "v", "v/part_1", 8), id);
  EXPECT_NE(a.ForPush(options, "w", "v/part_0", 8), id);
  // The NUL between the names: ("ab", "c") is not ("a", "bc").
  EXPECT_NE(a.ForPush(options, "ab", "c", 0), a.ForPush(options, "a", "bc", 0));
  options.idempotency_key = 43;
  EXPECT_NE(a.ForPush(options, "v", "v/part_0", 8), id);
}

}  // namespace
}  // namespace shardps
