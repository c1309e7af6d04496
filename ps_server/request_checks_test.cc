#include "ps_server/request_checks.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

TEST(RequestChecksTest, RangesResolveWithinTheShard) {
  std::shared_ptr<Shard> shard = MakeTestShard(DenseTestSpec("w", 5, 2));
  absl::StatusOr<RowRange> whole = ResolveRange(*shard, 1, 0, "pull");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->begin, 1);
  EXPECT_EQ(whole->end, 5);
  const absl::Status past = ResolveRange(*shard, 2, 6, "pull").status();
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(past.message(), "pull: row range [2, 6) is not within")) << past;
  std::shared_ptr<Shard> table = MakeTestShard(DynamicTestSpec("t", 2));
  EXPECT_TRUE(absl::StrContains(ResolveRange(*table, 0, 1, "pull").status().message(),
                                "is a dynamic table"));
}

TEST(RequestChecksTest, IdsArePackedOrRawButNotBoth) {
  google::protobuf::RepeatedField<int64_t> packed;
  packed.Add(3);
  packed.Add(1);
  std::vector<int64_t> scratch;
  absl::StatusOr<absl::Span<const int64_t>> ids = RequestIds(packed, "", "pull", &scratch);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(std::vector<int64_t>(ids->begin(), ids->end()), (std::vector<int64_t>{3, 1}));

  const std::vector<int64_t> raw_ids = {7, 8, 9};
  // One byte ahead, so that the ids are not aligned: they are copied into scratch.
  std::string storage(1 + raw_ids.size() * sizeof(int64_t), '\0');
  std::memcpy(&storage[1], raw_ids.data(), raw_ids.size() * sizeof(int64_t));
  const std::string unaligned = storage.substr(1);
  google::protobuf::RepeatedField<int64_t> none;
  ids = RequestIds(none, unaligned, "pull", &scratch);
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(std::vector<int64_t>(ids->begin(), ids->end()), raw_ids);

  EXPECT_TRUE(absl::StrContains(RequestIds(packed, unaligned, "pull", &scratch).status().message(),
                                "both ids (2 ids) and ids_bytes (24 bytes) are set"));
  EXPECT_TRUE(absl::StrContains(RequestIds(none, "abc", "pull", &scratch).status().message(),
                                "ids_bytes has 3 bytes, not a multiple of 8"));
}

TEST(RequestChecksTest, IdsMustBeRowsOfTheShard) {
  std::shared_ptr<Shard> shard = MakeTestShard(DenseTestSpec("w", 5, 2));
  const std::vector<int64_t> good = {0, 4, 4};
  EXPECT_TRUE(CheckIds(*shard, good, "push rows").ok());
  const std::vector<int64_t> bad = {0, 5};
  const absl::Status s = CheckIds(*shard, bad, "push rows");
  EXPECT_TRUE(absl::StrContains(s.message(), "ids[1] = 5 is out of range; the shard has 5 rows"))
      << s;
}

TEST(RequestChecksTest, GradientsHaveTheirSizeAndAreFinite) {
  const std::vector<float> two = {1.0f, std::numeric_limits<float>::infinity()};
  const absl::string_view bytes(reinterpret_cast<const char*>(two.data()), 8);
  EXPECT_TRUE(absl::StrContains(CheckGradient(GradientBytes(bytes), 3, "push", "data").message(),
                                "push: data has 8 bytes, expected 12 (3 float32 values)"));
  EXPECT_TRUE(absl::StrContains(CheckGradient(GradientBytes(bytes), 2, "push", "data").message(),
                                "data[1] is inf; values must be finite"));
  const std::vector<float> finite = {1.0f, 2.0f};
  std::vector<float> scratch;
  absl::StatusOr<const float*> floats =
      CheckedFloats(absl::string_view(reinterpret_cast<const char*>(finite.data()), 8), 2, "assign",
                    "data", &scratch);
  ASSERT_TRUE(floats.ok()) << floats.status();
  EXPECT_EQ((*floats)[1], 2.0f);
}

TEST(RequestChecksTest, RequestIdReplicaAndTimeout) {
  EXPECT_TRUE(
      absl::StrContains(CheckRequestId(0, "push").message(), "request_id must be non-zero"));
  EXPECT_TRUE(CheckRequestId(7, "push").ok());
  std::shared_ptr<Shard> shard = MakeTestShard(DenseTestSpec("w", 5, 2, OptimizerSpec::SGD, 2));
  SyncTag tag;
  tag.set_replica(2);
  EXPECT_TRUE(absl::StrContains(CheckReplica(*shard, tag, "push").message(),
                                "sync.replica 2 is not in [0, 2)"));
  tag.set_replica(1);
  EXPECT_TRUE(CheckReplica(*shard, tag, "push").ok());
  EXPECT_TRUE(absl::StrContains(CheckTimeout(-1, "pull").message(),
                                "wait_timeout_ms must be >= 0, got -1"));
  EXPECT_TRUE(CheckTimeout(0, "pull").ok());
}

}  // namespace
}  // namespace shardps
