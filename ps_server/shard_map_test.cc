#include "ps_server/shard_map.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

TEST(ShardMapTest, FindsWhatWasInsertedAndNamesTheTaskWhenMissing) {
  ShardMap map(/*task_index=*/3);
  const absl::Status missing = map.Find("w", "pull from shard 'w'").status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "pull from shard 'w': no such shard on ps task 3");

  int64_t kept = 0;
  absl::StatusOr<int> created = map.InsertNew(
      {MakeTestShard(DenseTestSpec("w", 4, 2)), MakeTestShard(DenseTestSpec("b", 1, 2))},
      [&](int64_t bytes) { kept += bytes; });
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(*created, 2);
  EXPECT_EQ(kept, (4 + 1) * 2 * 4);
  ASSERT_TRUE(map.Find("w", "pull").ok());
  std::vector<std::string> names;
  for (const auto& shard : map.All()) names.push_back(shard->name());
  EXPECT_EQ(names, (std::vector<std::string>{"b", "w"}));
}

TEST(ShardMapTest, InsertsAllOrNothingAndSkipsIdenticalShards) {
  ShardMap map(0);
  auto none = [](int64_t) {};
  ASSERT_TRUE(map.InsertNew({MakeTestShard(DenseTestSpec("w", 4, 2))}, none).ok());
  // The same spec again is skipped; another spec of the same name refuses the whole request.
  absl::StatusOr<int> again = map.InsertNew(
      {MakeTestShard(DenseTestSpec("w", 4, 2)), MakeTestShard(DenseTestSpec("x", 1, 1))}, none);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, 1);
  const absl::Status conflict = map.InsertNew({MakeTestShard(DenseTestSpec("y", 1, 1)),
                                               MakeTestShard(DenseTestSpec("w", 5, 2))},
                                              none)
                                    .status();
  EXPECT_EQ(conflict.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_FALSE(map.Find("y", "pull").ok());

  CreateShardsRequest request;
  *request.add_shards() = DenseTestSpec("w", 4, 2);
  *request.add_shards() = DenseTestSpec("z", 1, 1);
  absl::StatusOr<std::vector<int>> absent = map.Absent(request, {0, 1});
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(*absent, std::vector<int>{1});
  *request.mutable_shards(0) = DenseTestSpec("w", 6, 2);
  EXPECT_EQ(map.Absent(request, {0, 1}).status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(ShardMapTest, RemovesWhatTheCallerSelectsAndCountsTheRest) {
  ShardMap map(0);
  auto none = [](int64_t) {};
  ASSERT_TRUE(map.InsertNew({MakeTestShard(DenseTestSpec("a", 4, 2, OptimizerSpec::SGD, 0, "a")),
                             MakeTestShard(DenseTestSpec("b", 2, 2, OptimizerSpec::SGD, 0, "b")),
                             MakeTestShard(DynamicTestSpec("t", 4))},
                            none)
                  .ok());
  ShardMap::Totals totals = map.Count();
  EXPECT_EQ(totals.num_shards, 3);
  EXPECT_EQ(totals.bytes, (4 + 2) * 2 * 4);  // a dynamic table's reservation is not counted
  ASSERT_EQ(totals.dynamic.size(), 1u);
  EXPECT_EQ(totals.dynamic[0]->name(), "t");

  const auto dropped = map.Remove([](const ShardSpec& spec) { return spec.variable() == "a"; });
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0]->name(), "a");
  EXPECT_FALSE(map.Find("a", "pull").ok());
  totals = map.Count();
  EXPECT_EQ(totals.num_shards, 2);
  EXPECT_EQ(totals.bytes, 2 * 2 * 4);
}

}  // namespace
}  // namespace shardps
