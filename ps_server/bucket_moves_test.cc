#include "ps_server/bucket_moves.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "math/optimizer.h"

namespace shardps {
namespace {

constexpr int32_t kBuckets = 16;
constexpr int64_t kDim = 4;

std::unique_ptr<Optimizer> Adagrad() {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAGRAD);
  spec.set_learning_rate(0.1);
  auto opt = Optimizer::Create(spec);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return *std::move(opt);
}

std::unique_ptr<DynamicTable> Table(const Optimizer& opt, BucketRange range) {
  DynamicTableOptions o;
  o.name = "emb";
  o.dim = kDim;
  o.initializer.set_type(InitializerSpec::RANDOM_NORMAL);
  o.initializer.set_seed(3);
  o.num_buckets = kBuckets;
  o.num_stripes = 4;
  o.all_buckets = false;
  for (int32_t b = range.begin; b < range.end; ++b) o.buckets.push_back(b);
  auto t = DynamicTable::Create(o, opt);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

// `n` keys in bucket `bucket`.
std::vector<int64_t> KeysIn(int32_t bucket, int n) {
  std::vector<int64_t> keys;
  for (int64_t k = 1; static_cast<int>(keys.size()) < n; ++k) {
    if (BucketOf(k, kBuckets) == bucket) keys.push_back(k);
  }
  return keys;
}

std::vector<float> Grads(size_t rows, float scale) {
  std::vector<float> g(rows * kDim);
  for (size_t i = 0; i < g.size(); ++i) g[i] = scale * (1.0f + static_cast<float>(i % 7));
  return g;
}

MoveBucketsRequest Request(MoveBucketsRequest::Op op, BucketRange buckets) {
  MoveBucketsRequest r;
  r.set_op(op);
  for (int32_t b = buckets.begin; b < buckets.end; ++b) r.add_buckets(b);
  return r;
}

// Forwards an EXPORT's rows into a STAGE request.
MoveBucketsRequest Stage(const MoveBucketsResponse& exported, BucketRange buckets,
                         uint32_t since) {
  MoveBucketsRequest r = Request(MoveBucketsRequest::STAGE, buckets);
  r.set_since_epoch(since);
  r.set_keys(exported.keys());
  r.set_last_steps(exported.last_steps());
  r.set_values(exported.values());
  *r.mutable_deleted_keys() = exported.deleted_keys();
  return r;
}

ErrorDetail DetailOf(const absl::Status& s) {
  std::optional<ErrorDetail> d = GetDetail(s);
  EXPECT_TRUE(d.has_value()) << s;
  return d.value_or(ErrorDetail());
}

class BucketMovesTest : public ::testing::Test {
 protected:
  BucketMovesTest()
      : opt_(Adagrad()),
        src_table_(Table(*opt_, {0, 8})),
        dst_table_(Table(*opt_, {8, 16})),
        src_("emb", kBuckets, {0, 8}),
        dst_("emb", kBuckets, {8, 16}) {}

  absl::Status Push(DynamicTable& t, const std::vector<int64_t>& keys, float scale) {
    return t.Push(keys, Grads(keys.size(), scale), *opt_, ++step_).status();
  }

  std::unique_ptr<Optimizer> opt_;
  std::unique_ptr<DynamicTable> src_table_;
  std::unique_ptr<DynamicTable> dst_table_;
  BucketMoves src_;
  BucketMoves dst_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
  int64_t step_ = 0;
};

TEST_F(BucketMovesTest, CopyCatchUpFreezeAndSwitchMoveEveryRowAndItsSlots) {
  const BucketRange b7{7, 8};
  const std::vector<int64_t> keys = KeysIn(7, 20);
  ASSERT_TRUE(Push(*src_table_, keys, 0.5f).ok());

  // Copy.
  MoveBucketsResponse copy;
  ASSERT_TRUE(src_.Apply(Request(MoveBucketsRequest::EXPORT, b7), src_table_.get(), false, now_,
                         &copy).ok());
  EXPECT_EQ(copy.rows(), 20);
  MoveBucketsResponse staged;
  ASSERT_TRUE(dst_.Apply(Stage(copy, b7, 0), dst_table_.get(), false, now_, &staged).ok());
  EXPECT_EQ(dst_.staged().begin, 7);
  // Staged rows are not served: a pull of them is refused as not held.
  const absl::Status staged_pull = dst_.Check(keys, false, 0, now_, "pull");
  EXPECT_EQ(DetailOf(staged_pull).kind(), ErrorDetail::BUCKET_MOVED);

  // Training goes on at the source: some rows change, one new, one erased.
  std::vector<int64_t> more = {keys[0], keys[1], KeysIn(7, 21).back()};
  ASSERT_TRUE(Push(*src_table_, more, -0.25f).ok());
  ASSERT_TRUE(src_table_->EraseKeys({keys[5]}).ok());

  // Catch up, frozen.
  MoveBucketsRequest last = Request(MoveBucketsRequest::EXPORT, b7);
  last.set_since_epoch(copy.epoch());
  last.set_freeze(true);
  last.set_freeze_ms(10000);
  MoveBucketsResponse delta;
  ASSERT_TRUE(src_.Apply(last, src_table_.get(), false, now_, &delta).ok());
  EXPECT_EQ(delta.rows(), 3);
  ASSERT_EQ(delta.deleted_keys_size(), 1);
  EXPECT_EQ(delta.deleted_keys(0), keys[5]);
  ASSERT_TRUE(dst_.Apply(Stage(delta, b7, copy.epoch()), dst_table_.get(), false, now_, &staged)
                  .ok());

  // Frozen: a push to the bucket is refused (moving), a pull is served.
  const absl::Status frozen = src_.Check({keys[2]}, true, 0, now_, "push");
  EXPECT_EQ(frozen.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(DetailOf(frozen).moving());
  EXPECT_TRUE(src_.Check({keys[2]}, false, 0, now_, "pull").ok());
  EXPECT_TRUE(src_.Check(KeysIn(6, 3), true, 0, now_, "push").ok());

  const auto want = src_table_->ExportBuckets({7});
  ASSERT_TRUE(want.ok());

  MoveBucketsRequest drop = Request(MoveBucketsRequest::DROP, b7);
  drop.set_routing_version(1);
  drop.set_to_ps(1);
  MoveBucketsResponse dropped;
  ASSERT_TRUE(src_.Apply(drop, src_table_.get(), false, now_, &dropped).ok());
  EXPECT_EQ(dropped.bucket_end(), 7);
  MoveBucketsRequest activate = Request(MoveBucketsRequest::ACTIVATE, b7);
  activate.set_routing_version(1);
  MoveBucketsResponse activated;
  ASSERT_TRUE(dst_.Apply(activate, dst_table_.get(), false, now_, &activated).ok());
  EXPECT_EQ(activated.bucket_begin(), 7);
  EXPECT_EQ(activated.bucket_end(), 16);
  EXPECT_EQ(dst_.range().begin, 7);
  EXPECT_EQ(dst_.routing_version(), 1);

  // Every row, with its slots and last step, is at the target; none at the source.
  const auto got = dst_table_->ExportBuckets({7});
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->keys.size(), want->keys.size());
  std::map<int64_t, size_t> at;
  for (size_t k = 0; k < got->keys.size(); ++k) at[got->keys[k]] = k;
  const size_t row = static_cast<size_t>(kDim * 2);
  for (size_t k = 0; k < want->keys.size(); ++k) {
    ASSERT_EQ(at.count(want->keys[k]), 1u) << want->keys[k];
    const size_t j = at[want->keys[k]];
    EXPECT_EQ(got->last_steps[j], want->last_steps[k]);
    for (size_t e = 0; e < row; ++e) {
      EXPECT_EQ(got->values[j * row + e], want->values[k * row + e]);
    }
  }
  EXPECT_FALSE(src_table_->HoldsBucket(7));

  // The source now refuses the bucket's keys, naming where it went; a push routed by the old
  // layout is refused at both shards.
  const absl::Status gone = src_.Check({keys[0]}, false, 0, now_, "pull");
  EXPECT_EQ(DetailOf(gone).ps_task(), 1);
  EXPECT_EQ(DetailOf(gone).bucket(), 7);
  const absl::Status stale = dst_.Check(KeysIn(9, 2), true, 0, now_, "push");
  EXPECT_EQ(DetailOf(stale).bucket(), -1);
  EXPECT_EQ(DetailOf(stale).routing_version(), 1);
  EXPECT_TRUE(dst_.Check(KeysIn(7, 2), true, 1, now_, "push").ok());
}

TEST_F(BucketMovesTest, RefusalsChangeNothing) {
  MoveBucketsResponse r;
  auto refused = [&](BucketMoves& m, DynamicTable* t, const MoveBucketsRequest& req,
                     absl::StatusCode code, const char* words, bool in_step = false) {
    const auto s = m.Apply(req, t, in_step, now_, &r);
    EXPECT_EQ(s.status().code(), code) << s.status();
    EXPECT_TRUE(absl::StrContains(s.status().message(), words)) << s.status();
  };
  // Not at an edge; the whole range; not consecutive; outside the table.
  refused(src_, src_table_.get(), Request(MoveBucketsRequest::EXPORT, {3, 4}),
          absl::StatusCode::kFailedPrecondition, "edge");
  refused(src_, src_table_.get(), Request(MoveBucketsRequest::EXPORT, {0, 8}),
          absl::StatusCode::kFailedPrecondition, "at least one bucket");
  MoveBucketsRequest gap = Request(MoveBucketsRequest::EXPORT, {6, 7});
  gap.add_buckets(9);
  refused(src_, src_table_.get(), gap, absl::StatusCode::kInvalidArgument, "consecutive");
  refused(src_, src_table_.get(), Request(MoveBucketsRequest::EXPORT, {16, 17}),
          absl::StatusCode::kInvalidArgument, "consecutive");
  refused(src_, src_table_.get(), MoveBucketsRequest(), absl::StatusCode::kInvalidArgument,
          "no buckets");
  // A freeze needs a duration and a step boundary.
  MoveBucketsRequest freeze = Request(MoveBucketsRequest::EXPORT, {7, 8});
  freeze.set_freeze(true);
  refused(src_, src_table_.get(), freeze, absl::StatusCode::kInvalidArgument, "freeze_ms");
  freeze.set_freeze_ms(1000);
  refused(src_, src_table_.get(), freeze, absl::StatusCode::kFailedPrecondition, "SYNC", true);
  // A drop needs a freeze, still running, and a higher routing version.
  MoveBucketsRequest drop = Request(MoveBucketsRequest::DROP, {7, 8});
  drop.set_routing_version(1);
  refused(src_, src_table_.get(), drop, absl::StatusCode::kFailedPrecondition, "not frozen");
  ASSERT_TRUE(src_.Apply(freeze, src_table_.get(), false, now_, &r).ok());
  drop.set_routing_version(0);
  refused(src_, src_table_.get(), drop, absl::StatusCode::kFailedPrecondition, "not above");
  drop.set_routing_version(1);
  const absl::Time late = now_ + absl::Seconds(2);
  const auto expired = src_.Apply(drop, src_table_.get(), false, late, &r);
  EXPECT_TRUE(absl::StrContains(expired.status().message(), "freeze may have run out"))
      << expired.status();
  // Thawed: pushes to the bucket are taken again.
  EXPECT_TRUE(src_.Check(KeysIn(7, 1), true, 0, late, "push").ok());
  EXPECT_TRUE(src_table_->HoldsBucket(7));
  EXPECT_EQ(src_.range().end, 8);
  // Staging: next to the range only; an activation of buckets not staged.
  refused(dst_, dst_table_.get(), Request(MoveBucketsRequest::STAGE, {3, 4}),
          absl::StatusCode::kFailedPrecondition, "not next to");
  MoveBucketsRequest activate = Request(MoveBucketsRequest::ACTIVATE, {7, 8});
  activate.set_routing_version(1);
  refused(dst_, dst_table_.get(), activate, absl::StatusCode::kFailedPrecondition, "not staged");
  MoveBucketsRequest delta = Request(MoveBucketsRequest::STAGE, {7, 8});
  delta.set_since_epoch(3);
  refused(dst_, dst_table_.get(), delta, absl::StatusCode::kFailedPrecondition, "not staged");
  MoveBucketsRequest bad_rows = Request(MoveBucketsRequest::STAGE, {7, 8});
  bad_rows.set_keys(std::string(12, 'x'));
  refused(dst_, dst_table_.get(), bad_rows, absl::StatusCode::kInvalidArgument, "multiple of 8");
  EXPECT_EQ(dst_.range().begin, 8);
  EXPECT_EQ(dst_.routing_version(), 0);
  EXPECT_FALSE(dst_table_->HoldsBucket(7));
}

TEST_F(BucketMovesTest, AbortThawsTheSourceAndDropsTheStagedCopy) {
  const std::vector<int64_t> keys = KeysIn(8, 5);
  ASSERT_TRUE(Push(*dst_table_, keys, 1.0f).ok());
  MoveBucketsRequest freeze = Request(MoveBucketsRequest::EXPORT, {8, 9});
  freeze.set_freeze(true);
  freeze.set_freeze_ms(60000);
  MoveBucketsResponse copy;
  ASSERT_TRUE(dst_.Apply(freeze, dst_table_.get(), false, now_, &copy).ok());
  MoveBucketsResponse r;
  ASSERT_TRUE(src_.Apply(Stage(copy, {8, 9}, 0), src_table_.get(), false, now_, &r).ok());
  EXPECT_TRUE(src_table_->HoldsBucket(8));
  ASSERT_TRUE(dst_.Apply(Request(MoveBucketsRequest::ABORT, {8, 9}), dst_table_.get(), false,
                         now_, &r).ok());
  ASSERT_TRUE(src_.Apply(Request(MoveBucketsRequest::ABORT, {8, 9}), src_table_.get(), false,
                         now_, &r).ok());
  EXPECT_FALSE(src_table_->HoldsBucket(8));
  EXPECT_TRUE(dst_.Check(keys, true, 0, now_, "push").ok());
  EXPECT_EQ(dst_table_->size(), 5);
  // A fresh staging after an unfinished one replaces it.
  ASSERT_TRUE(src_.Apply(Stage(copy, {8, 9}, 0), src_table_.get(), false, now_, &r).ok());
  ASSERT_TRUE(src_.Apply(Stage(copy, {8, 9}, 0), src_table_.get(), false, now_, &r).ok());
  EXPECT_EQ(src_table_->size(), 5);
}

TEST(RowsCodecTest, RoundTripsAndNamesBadSizes) {
  RowBatch rows;
  rows.keys = {5, -7};
  rows.last_steps = {1, 9};
  rows.values = {1, 2, 3, 4, 5, 6};
  std::string k, s, v;
  EncodeRows(rows, &k, &s, &v);
  auto back = DecodeRows(k, s, v, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->keys, rows.keys);
  EXPECT_EQ(back->last_steps, rows.last_steps);
  EXPECT_EQ(back->values, rows.values);
  EXPECT_TRUE(absl::StrContains(DecodeRows(k, s, v, 4).status().message(), "values"));
  EXPECT_TRUE(absl::StrContains(DecodeRows(k, "", v, 3).status().message(), "last_steps"));
}

}  // namespace
}  // namespace shardps
