#include "client/bucket_reroute.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "partitioners/buckets.h"

namespace shardps {
namespace {

constexpr int32_t kBuckets = 16;
constexpr int64_t kWidth = 2;

// Shard 0 on ps 0 holds [0, split), shard 1 on ps 1 holds [split, 16).
VariableLayout Layout(int32_t split, int64_t routing_version) {
  VariableLayout layout = MakeLayout("emb", {0, kWidth});
  layout.dynamic = true;
  layout.num_buckets = kBuckets;
  layout.routing_version = routing_version;
  for (int s = 0; s < 2; ++s) {
    VariableLayout::Shard shard;
    shard.spec.set_name("emb/part_" + std::to_string(s));
    shard.ps = s;
    shard.buckets = s == 0 ? BucketRange{0, split} : BucketRange{split, kBuckets};
    layout.shards.push_back(shard);
  }
  return layout;
}

int64_t KeyIn(int32_t bucket, int nth = 0) {
  for (int64_t k = 1;; ++k) {
    if (BucketOf(k, kBuckets) == bucket && nth-- == 0) return k;
  }
}

// A push of `keys` to `shard`, key k's row {k, -k}.
PushRowsRequest Push(const std::string& shard, const std::vector<int64_t>& keys) {
  PushRowsRequest r;
  r.set_shard(shard);
  r.set_request_id(99);
  r.mutable_ids_bytes()->assign(reinterpret_cast<const char*>(keys.data()),
                                keys.size() * sizeof(int64_t));
  std::vector<float> rows;
  for (int64_t k : keys) {
    rows.push_back(static_cast<float>(k));
    rows.push_back(-static_cast<float>(k));
  }
  r.mutable_data()->assign(reinterpret_cast<const char*>(rows.data()), rows.size() * 4);
  r.mutable_sync()->set_step(4);
  r.mutable_sync()->set_replica(1);
  r.set_generation(3);
  return r;
}

std::map<int64_t, float> RowsOf(const PushRowsRequest& r) {
  std::map<int64_t, float> out;
  const size_t n = r.ids_bytes().size() / 8;
  for (size_t k = 0; k < n; ++k) {
    int64_t key;
    float first;
    std::memcpy(&key, r.ids_bytes().data() + 8 * k, 8);
    std::memcpy(&first, r.data().data() + k * kWidth * 4, 4);
    out[key] = first;
  }
  return out;
}

TEST(BucketRerouteTest, SyncSendsEachRefusedShardOneRequestByTheNewLayout) {
  // Bucket 7 moved from shard 0 to shard 1; both shards refused this replica's share.
  const int64_t a = KeyIn(5), b = KeyIn(7), c = KeyIn(9);
  const PushRowsRequest to0 = Push("emb/part_0", {a, b});
  const PushRowsRequest to1 = Push("emb/part_1", {c});
  std::vector<std::string> ids_for;
  auto routed = RerouteRowPushes({&to0, &to1}, Layout(7, 1), /*sync=*/true, 100,
                                 [&](const std::string& shard, int64_t chunk) {
                                   ids_for.push_back(shard + "#" + std::to_string(chunk));
                                   return uint64_t{1000} + ids_for.size();
                                 });
  ASSERT_TRUE(routed.ok()) << routed.status();
  ASSERT_EQ(routed->size(), 2u);
  EXPECT_EQ((*routed)[0].first, 0);
  EXPECT_EQ((*routed)[0].second.shard(), "emb/part_0");
  EXPECT_EQ(RowsOf((*routed)[0].second), (std::map<int64_t, float>{{a, float(a)}}));
  EXPECT_EQ((*routed)[1].first, 1);
  EXPECT_EQ(RowsOf((*routed)[1].second),
            (std::map<int64_t, float>{{b, float(b)}, {c, float(c)}}));
  for (const auto& [ps, r] : *routed) {
    EXPECT_EQ(r.routing_version(), 1);
    EXPECT_EQ(r.sync().step(), 4);
    EXPECT_EQ(r.sync().replica(), 1);
    EXPECT_EQ(r.generation(), 3);
    EXPECT_NE(r.request_id(), 99u);
  }
  EXPECT_EQ(ids_for, (std::vector<std::string>{"emb/part_0#0", "emb/part_1#0"}));
}

TEST(BucketRerouteTest, SyncRefusedShardWithNoKeysLeftStillGetsItsEmptyShare) {
  // Every key of shard 0's share moved to shard 1: shard 0 still needs this replica's push.
  const PushRowsRequest to0 = Push("emb/part_0", {KeyIn(7)});
  const PushRowsRequest to1 = Push("emb/part_1", {});
  auto routed = RerouteRowPushes({&to0, &to1}, Layout(7, 2), true, 100,
                                 [](const std::string&, int64_t) { return uint64_t{5}; });
  ASSERT_TRUE(routed.ok()) << routed.status();
  ASSERT_EQ(routed->size(), 2u);
  EXPECT_TRUE((*routed)[0].second.ids_bytes().empty());
  EXPECT_EQ(RowsOf((*routed)[1].second).size(), 1u);
}

TEST(BucketRerouteTest, AsyncSkipsEmptySharesAndChunks) {
  const PushRowsRequest to0 = Push("emb/part_0", {KeyIn(7, 0), KeyIn(7, 1), KeyIn(7, 2)});
  auto routed = RerouteRowPushes({&to0}, Layout(7, 1), /*sync=*/false, /*max_rows=*/2,
                                 [](const std::string&, int64_t chunk) {
                                   return static_cast<uint64_t>(chunk + 1);
                                 });
  ASSERT_TRUE(routed.ok()) << routed.status();
  ASSERT_EQ(routed->size(), 2u);  // shard 1 only, in chunks of 2 and 1
  EXPECT_EQ((*routed)[0].second.shard(), "emb/part_1");
  EXPECT_EQ(RowsOf((*routed)[0].second).size(), 2u);
  EXPECT_EQ(RowsOf((*routed)[1].second).size(), 1u);
  EXPECT_EQ((*routed)[1].second.request_id(), 2u);
}

TEST(BucketRerouteTest, MalformedRequestIsNamed) {
  PushRowsRequest bad = Push("emb/part_0", {KeyIn(3)});
  bad.mutable_data()->resize(3);
  auto routed = RerouteRowPushes({&bad}, Layout(7, 1), false, 10,
                                 [](const std::string&, int64_t) { return uint64_t{1}; });
  EXPECT_EQ(routed.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BucketRerouteTest, RecognisesTheRefusalAndItsBatchItem) {
  ErrorDetail d;
  d.set_kind(ErrorDetail::BUCKET_MOVED);
  d.set_batch_item(2);
  const absl::Status moved = WithDetail(absl::AbortedError("moved"), d);
  EXPECT_TRUE(IsBucketMoved(moved));
  EXPECT_FALSE(IsBucketMoving(moved));
  EXPECT_EQ(FirstUnapplied(moved, 5), 2);
  EXPECT_EQ(FirstUnapplied(moved, 2), 1);
  d.set_moving(true);
  EXPECT_TRUE(IsBucketMoving(WithDetail(absl::AbortedError("moving"), d)));
  EXPECT_FALSE(IsBucketMoved(absl::AbortedError("other")));
  EXPECT_FALSE(IsBucketMoved(WithDetail(absl::FailedPreconditionError("x"), d)));
}

}  // namespace
}  // namespace shardps
