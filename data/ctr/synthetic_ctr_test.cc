#include "data/ctr/synthetic_ctr.h"

#include <algorithm>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "data/ctr/zipf.h"

namespace shardps {
namespace {

std::unique_ptr<SyntheticCtrSource> Make(const std::string& spec) {
  auto source = SyntheticCtrSource::FromSpec(spec);
  EXPECT_TRUE(source.ok()) << source.status();
  return source.ok() ? *std::move(source) : nullptr;
}

// Example j of `batch` as a batch of one.
CtrBatch Slice(const CtrBatch& batch, int dense, int j) {
  CtrBatch one;
  one.size = 1;
  one.labels = {batch.labels[j]};
  one.dense.assign(batch.dense.begin() + j * dense, batch.dense.begin() + (j + 1) * dense);
  for (const CtrFeatureIds& f : batch.features) {
    CtrFeatureIds ids;
    ids.offsets = {0, f.offsets[j + 1] - f.offsets[j]};
    ids.ids.assign(f.ids.begin() + f.offsets[j], f.ids.begin() + f.offsets[j + 1]);
    one.features.push_back(ids);
  }
  return one;
}

TEST(SyntheticCtrTest, DeterministicInAnyOrder) {
  const std::string spec = "synthetic_ctr:examples=1000,dense=3,vocab=1000|50|100000,hot=1|1..4|2,seed=5";
  auto a = Make(spec);
  auto b = Make(spec);
  CtrBatch all;
  ASSERT_TRUE(ReadRange(*a, 0, 100, &all).ok());
  ASSERT_TRUE(ValidateBatch(a->schema(), all).ok()) << ValidateBatch(a->schema(), all);
  // Reversed and repeated, through the other source.
  std::vector<int64_t> order;
  for (int64_t i = 99; i >= 0; --i) order.push_back(i);
  order.push_back(7);
  CtrBatch reversed;
  ASSERT_TRUE(b->Read(order, &reversed).ok());
  for (int k = 0; k < 101; ++k) {
    EXPECT_EQ(Slice(reversed, 3, k), Slice(all, 3, static_cast<int>(order[k]))) << k;
  }
  // Reusing a batch gives the same contents.
  ASSERT_TRUE(a->Read(order, &all).ok());
  EXPECT_EQ(all, reversed);
  // Another seed gives other examples.
  auto c = Make(spec + "0");
  CtrBatch other;
  ASSERT_TRUE(ReadRange(*c, 0, 100, &other).ok());
  EXPECT_NE(other.features[2].ids, Slice(all, 3, 0).features[2].ids);
}

TEST(SyntheticCtrTest, OffsetSelectsGlobalExamples) {
  auto train = Make("examples=100,vocab=1000,tables=4,seed=3");
  auto eval = Make("examples=50,offset=60,vocab=1000,tables=4,seed=3");
  EXPECT_EQ(train->bias(), eval->bias());  // the same planted model
  CtrBatch a;
  CtrBatch b;
  ASSERT_TRUE(ReadRange(*train, 60, 61, &a).ok());
  ASSERT_TRUE(ReadRange(*eval, 0, 1, &b).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(train->PlantedProbability(61), eval->PlantedProbability(1));
}

TEST(SyntheticCtrTest, IdsFollowZipfAndHotIdsAreScrambled) {
  auto source = Make("examples=40000,dense=0,vocab=100000,tables=1,zipf=1.1,seed=11");
  CtrBatch batch;
  ASSERT_TRUE(ReadRange(*source, 0, 40000, &batch).ok());
  std::map<int64_t, int64_t> counts;
  for (int64_t id : batch.features[0].ids) ++counts[id];
  std::vector<std::pair<int64_t, int64_t>> by_count;
  for (const auto& [id, n] : counts) by_count.push_back({n, id});
  std::sort(by_count.rbegin(), by_count.rend());
  auto zipf = ZipfSampler::Create(100000, 1.1);
  ASSERT_TRUE(zipf.ok());
  for (int r = 0; r < 3; ++r) {
    const double expected = zipf->Probability(r) * 40000;
    EXPECT_NEAR(by_count[r].first, expected, 5 * std::sqrt(expected)) << "rank " << r;
  }
  // The three hottest ids are not the first ids of the range.
  for (int r = 0; r < 3; ++r) EXPECT_GT(by_count[r].second, 1000) << "rank " << r;
}

TEST(SyntheticCtrTest, PlantedAucAndClickRate) {
  for (double rate : {0.1, 0.25}) {
    auto source = Make("examples=20000,dense=13,vocab=10000,tables=8,seed=2,click_rate=" +
                       std::to_string(rate));
    auto m = source->ComputePlantedMetrics(0, 20000);
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_GT(m->auc, 0.7) << rate;
    EXPECT_LT(m->auc, 0.97) << rate;
    EXPECT_NEAR(m->click_rate, rate, 0.03);
    EXPECT_NEAR(m->mean_probability, rate, 0.02);
    EXPECT_GT(m->log_loss, 0.0);
    EXPECT_EQ(m->examples, 20000);
  }
  // No signal: the planted AUC is about 0.5.
  auto flat = Make("examples=20000,vocab=100,tables=2,signal=0");
  auto m = flat->ComputePlantedMetrics(0, 20000);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NEAR(m->auc, 0.5, 0.03);
}

TEST(SyntheticCtrTest, HotnessMissingAndHashedIds) {
  auto source = Make("examples=2000,dense=1,vocab=1000|1000,hot=1..3|2,missing=0.3,ids=hashed");
  EXPECT_EQ(source->schema().features[0].vocab_size, 0);
  EXPECT_EQ(source->schema().features[0].max_hotness, 3);
  CtrBatch batch;
  ASSERT_TRUE(ReadRange(*source, 0, 2000, &batch).ok());
  ASSERT_TRUE(ValidateBatch(source->schema(), batch).ok());
  std::vector<int> hist(4, 0);
  int missing2 = 0;
  for (int j = 0; j < 2000; ++j) {
    ++hist[batch.features[0].offsets[j + 1] - batch.features[0].offsets[j]];
    const int64_t c2 = batch.features[1].offsets[j + 1] - batch.features[1].offsets[j];
    EXPECT_TRUE(c2 == 0 || c2 == 2);
    missing2 += c2 == 0;
  }
  EXPECT_NEAR(hist[0], 600, 90);
  for (int c = 1; c <= 3; ++c) EXPECT_NEAR(hist[c], 2000 * 0.7 / 3, 90) << c;
  EXPECT_NEAR(missing2, 600, 90);
  const auto& ids = batch.features[0].ids;
  EXPECT_TRUE(std::any_of(ids.begin(), ids.end(), [](int64_t id) { return id < 0; }));
}

TEST(SyntheticCtrTest, DenseValuesAreLog1pOfRawCounts) {
  auto source = Make("examples=50,dense=5,vocab=10,tables=1");
  CtrBatch batch;
  ASSERT_TRUE(ReadRange(*source, 0, 50, &batch).ok());
  for (int i = 0; i < 50; ++i) {
    for (int d = 0; d < 5; ++d) {
      EXPECT_EQ(batch.dense[i * 5 + d], CriteoDenseValue(source->RawDense(i, d)));
    }
  }
}

TEST(SyntheticCtrTest, RejectsOutOfRangeIndices) {
  auto source = Make("examples=10,vocab=10,tables=1");
  CtrBatch batch;
  const std::vector<int64_t> indices = {3, 10};
  const absl::Status status = source->Read(indices, &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("example index 10"), std::string::npos) << status;
  EXPECT_FALSE(source->ComputePlantedMetrics(5, 11).ok());
}

}  // namespace
}  // namespace shardps
