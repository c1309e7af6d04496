#include "ps_server/shard_spec_checks.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

TEST(ShardSpecChecksTest, GeometryOfDenseScalarAndDynamicShards) {
  absl::StatusOr<Geometry> dense = ValidateShardSpec(DenseTestSpec("w", 5, 3));
  ASSERT_TRUE(dense.ok()) << dense.status();
  EXPECT_EQ(dense->rows, 5);
  EXPECT_EQ(dense->width, 3);

  ShardSpec scalar = DenseTestSpec("s", 1, 1);
  scalar.mutable_shape()->clear_dim();
  scalar.mutable_full_shape()->clear_dim();
  absl::StatusOr<Geometry> one = ValidateShardSpec(scalar);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->rows, 1);
  EXPECT_EQ(one->width, 1);

  absl::StatusOr<Geometry> dynamic = ValidateShardSpec(DynamicTestSpec("t", 8));
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  EXPECT_EQ(dynamic->rows, 0);
  EXPECT_EQ(dynamic->width, 8);
}

TEST(ShardSpecChecksTest, RefusalsNameTheShardAndTheField) {
  ShardSpec wide = DenseTestSpec("w", 5, 3);
  wide.mutable_full_shape()->set_dim(1, 4);
  absl::Status s = ValidateShardSpec(wide).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "shard 'w'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "shards split dim 0 only")) << s;

  ShardSpec offset = DenseTestSpec("w", 5, 3);
  offset.set_row_offset(1);
  s = ValidateShardSpec(offset).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "rows [1, 6) do not fit")) << s;

  ShardSpec async_backups = DenseTestSpec("w", 5, 3);
  async_backups.mutable_update()->set_replicas_to_aggregate(1);
  s = ValidateShardSpec(async_backups).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "replicas_to_aggregate is for SYNC only")) << s;

  ShardSpec buckets = DynamicTestSpec("t", 8);
  buckets.mutable_dynamic()->set_bucket_begin(3);
  buckets.mutable_dynamic()->set_bucket_end(2);
  s = ValidateShardSpec(buckets).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "dynamic buckets [3, 2)")) << s;
  // Empty is a shard added to a running table, which bucket moves then fill.
  buckets.mutable_dynamic()->set_bucket_begin(2);
  EXPECT_TRUE(ValidateShardSpec(buckets).ok());

  ShardSpec unnamed = DenseTestSpec("", 5, 3);
  s = ValidateShardSpec(unnamed).status();
  EXPECT_TRUE(absl::StrContains(s.message(), "empty name (variable 'v')")) << s;
}

TEST(ShardSpecChecksTest, DifferencesNameTheFirstField) {
  const ShardSpec a = DenseTestSpec("w", 5, 3);
  ShardSpec b = a;
  EXPECT_EQ(FirstSpecDifference(a, b), "");
  EXPECT_TRUE(CheckSameSpec(a, b).ok());
  b.mutable_optimizer()->set_learning_rate(0.25);
  EXPECT_TRUE(absl::StrContains(FirstSpecDifference(a, b), "learning_rate"))
      << FirstSpecDifference(a, b);
  const absl::Status s = CheckSameSpec(a, b);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(s.message(), "shard 'w' already exists with a different spec"))
      << s;
  // A dynamic table's shard: its range and part count are the table's layout's, not its own.
  ShardSpec t = DynamicTestSpec("t", 8);
  ShardSpec moved = t;
  moved.set_num_parts(t.num_parts() + 1);
  moved.mutable_dynamic()->set_bucket_begin(t.dynamic().bucket_begin() + 1);
  EXPECT_TRUE(CheckSameSpec(t, moved).ok());
  moved.mutable_dynamic()->set_num_buckets(t.dynamic().num_buckets() * 2);
  EXPECT_EQ(CheckSameSpec(t, moved).code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace shardps
