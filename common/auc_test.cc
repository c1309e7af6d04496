#include "common/auc.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(AucTest, PerfectAndInvertedOrder) {
  const std::vector<float> labels = {0, 0, 1, 1};
  EXPECT_DOUBLE_EQ(*ExactAuc(std::vector<float>{0.1f, 0.2f, 0.8f, 0.9f}, labels), 1.0);
  EXPECT_DOUBLE_EQ(*ExactAuc(std::vector<float>{0.9f, 0.8f, 0.2f, 0.1f}, labels), 0.0);
}

TEST(AucTest, HandComputedWithTies) {
  // Positives at 0.4, 0.6, 0.6; negatives at 0.2, 0.6, 0.7.
  // Pairs (pos, neg): 0.4 beats 0.2 (1), ties nothing, loses to 0.6, 0.7 -> 1.
  // Each 0.6 beats 0.2 (1), ties 0.6 (0.5), loses to 0.7 -> 1.5 each.  Total 4 of 9.
  const std::vector<float> scores = {0.4f, 0.6f, 0.6f, 0.2f, 0.6f, 0.7f};
  const std::vector<float> labels = {1, 1, 1, 0, 0, 0};
  EXPECT_DOUBLE_EQ(*ExactAuc(scores, labels), 4.0 / 9.0);
}

TEST(AucTest, AllTiedIsHalf) {
  EXPECT_DOUBLE_EQ(*ExactAuc(std::vector<float>{3, 3, 3}, std::vector<float>{1, 0, 0}), 0.5);
}

TEST(AucTest, DoubleScoresMatchFloat) {
  const std::vector<double> scores = {0.4, 0.6, 0.6, 0.2, 0.6, 0.7};
  EXPECT_DOUBLE_EQ(*ExactAuc(scores, std::vector<float>{1, 1, 1, 0, 0, 0}), 4.0 / 9.0);
}

TEST(AucTest, RejectsBadInput) {
  EXPECT_EQ(ExactAuc(std::vector<float>{0.1f}, std::vector<float>{1, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  const auto one_class = ExactAuc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 1});
  EXPECT_EQ(one_class.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(one_class.status().message().find("2 positives, 0 negatives"), std::string::npos);
  const auto bad_label = ExactAuc(std::vector<float>{0.1f, 0.2f}, std::vector<float>{1, 2});
  EXPECT_NE(bad_label.status().message().find("label 1"), std::string::npos);
  EXPECT_FALSE(ExactAuc(std::vector<float>{NAN, 0.2f}, std::vector<float>{1, 0}).ok());
}

TEST(LogLossTest, HandComputed) {
  // -(log 0.8 + log(1 - 0.4)) / 2
  const double expected = -(std::log(0.8) + std::log(0.6)) / 2;
  EXPECT_NEAR(*MeanLogLoss(std::vector<float>{0.8f, 0.4f}, std::vector<float>{1, 0}), expected,
              1e-7);
}

TEST(LogLossTest, ClipsCertainMistakes) {
  const double loss = *MeanLogLoss(std::vector<float>{0.0f}, std::vector<float>{1});
  EXPECT_NEAR(loss, -std::log(kLogLossEpsilon), 1e-6);
  EXPECT_TRUE(std::isfinite(loss));
  EXPECT_FALSE(MeanLogLoss(std::vector<float>{}, std::vector<float>{}).ok());
}

TEST(AucAccumulatorTest, MatchesExactWhenScoresAreInDistinctBins) {
  AucAccumulator acc(100);
  const std::vector<float> scores = {0.405f, 0.605f, 0.605f, 0.205f, 0.605f, 0.705f};
  const std::vector<float> labels = {1, 1, 1, 0, 0, 0};
  acc.Add(scores, labels);
  EXPECT_DOUBLE_EQ(acc.Auc(), 4.0 / 9.0);
  EXPECT_EQ(acc.positives(), 3);
  EXPECT_EQ(acc.negatives(), 3);
  EXPECT_DOUBLE_EQ(acc.click_rate(), 0.5);
  EXPECT_NEAR(acc.LogLoss(), *MeanLogLoss(scores, labels), 1e-12);
}

TEST(AucAccumulatorTest, MergedShardsEqualOneAccumulatorAndApproachExact) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0, 1);
  std::vector<float> scores;
  std::vector<float> labels;
  AucAccumulator a;
  AucAccumulator b;
  AucAccumulator all;
  for (int k = 0; k < 20000; ++k) {
    const float p = u(rng);
    const float y = u(rng) < p ? 1.0f : 0.0f;
    scores.push_back(p);
    labels.push_back(y);
    (k % 2 == 0 ? a : b).Add(p, y);
    all.Add(p, y);
  }
  ASSERT_TRUE(a.Merge(b).ok());
  EXPECT_DOUBLE_EQ(a.Auc(), all.Auc());
  EXPECT_NEAR(a.LogLoss(), all.LogLoss(), 1e-12);
  EXPECT_EQ(a.count(), 20000);
  EXPECT_NEAR(a.Auc(), *ExactAuc(scores, labels), 1e-4);
  EXPECT_GT(a.Auc(), 0.7);  // p itself is the true probability: AUC about 5/6
}

TEST(AucAccumulatorTest, EdgesAndErrors) {
  AucAccumulator acc(10);
  EXPECT_TRUE(std::isnan(acc.Auc()));
  EXPECT_TRUE(std::isnan(acc.LogLoss()));
  acc.Add(NAN, 1);
  acc.Add(-0.5f, 0);  // clamps into bin 0
  acc.Add(1.5f, 1);   // clamps into the last bin
  EXPECT_EQ(acc.nan_count(), 1);
  EXPECT_DOUBLE_EQ(acc.Auc(), 1.0);
  AucAccumulator other(20);
  EXPECT_EQ(acc.Merge(other).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardps
