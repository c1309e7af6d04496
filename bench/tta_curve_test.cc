#include "bench/tta_curve.h"

#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

TEST(TtaCurveTest, ParsesTheEvaluatorsLinesOnTheRunsClock) {
  // As evaluator/metrics_file.cc writes them, one out of order, with a blank line.
  const char text[] =
      "{\"job_id\": \"j\", \"step\": 0, \"version\": 0, \"checkpoint_id\": 0, \"time\": 100.5, "
      "\"loss\": 2.3, \"accuracy\": 0.1, \"examples\": 10000, \"consistent\": true, "
      "\"final\": false}\n"
      "{\"step\": 200, \"time\": 104.0, \"loss\": 0.4, \"accuracy\": 0.875, \"final\": false}\n"
      "\n"
      "{\"step\": 100, \"time\": 102.0, \"loss\": 0.5, \"accuracy\": 0.84, \"final\": false}\n"
      "{\"step\": 235, \"time\": 105.25, \"loss\": 0.38, \"accuracy\": 0.881, \"final\": true}\n";
  absl::StatusOr<std::vector<EvalPoint>> points = ParseMetricsLines(text, 100.0);
  ASSERT_TRUE(points.ok()) << points.status();
  ASSERT_EQ(points->size(), 4u);
  EXPECT_DOUBLE_EQ((*points)[0].t, 0.5);
  EXPECT_EQ((*points)[1].step, 100);
  EXPECT_DOUBLE_EQ((*points)[2].t, 4.0);
  EXPECT_TRUE((*points)[3].final);
  EXPECT_DOUBLE_EQ((*points)[3].loss, 0.38);

  // Interpolated between the evaluation below the target and the first at or above it:
  // 0.87 lies 30/35 of the way from 0.84 (at 2.0 s) to 0.875 (at 4.0 s).
  EXPECT_DOUBLE_EQ(TimeToAccuracy(*points, 0.87).value(), 2.0 + 2.0 * 0.03 / 0.035);
  EXPECT_DOUBLE_EQ(TimeToAccuracy(*points, 0.875).value(), 4.0);
  EXPECT_DOUBLE_EQ(TimeToAccuracy(*points, 0.88).value(), 4.0 + 1.25 * 0.005 / 0.006);
  EXPECT_DOUBLE_EQ(TimeToAccuracy(*points, 0.05).value(), 0.5);  // the first evaluation
  EXPECT_FALSE(TimeToAccuracy(*points, 0.885).has_value());
  EXPECT_DOUBLE_EQ(FinalAccuracy(*points).value(), 0.881);
}

TEST(TtaCurveTest, TheFirstCrossingCountsWhenTheCurveDipsBelowAgain) {
  std::vector<EvalPoint> points(4);
  const double t[] = {0, 10, 20, 30}, a[] = {0.5, 0.9, 0.7, 0.95};
  for (int i = 0; i < 4; ++i) {
    points[i].t = t[i];
    points[i].accuracy = a[i];
  }
  EXPECT_DOUBLE_EQ(TimeToAccuracy(points, 0.8).value(), 7.5);
  EXPECT_DOUBLE_EQ(TimeToAccuracy(points, 0.95).value(), 30);
  EXPECT_FALSE(TimeToAccuracy(points, 0.96).has_value());
  EXPECT_FALSE(TimeToAccuracy({}, 0.5).has_value());
}

TEST(TtaCurveTest, TargetsSitBelowTheLowerFinalQuality) {
  const std::vector<double> targets = TargetsBelow(0.8871, 0.8837, {0.002, 0.005, 0.01});
  ASSERT_EQ(targets.size(), 3u);
  EXPECT_DOUBLE_EQ(targets[0], 0.8737);
  EXPECT_DOUBLE_EQ(targets[1], 0.8787);
  EXPECT_DOUBLE_EQ(targets[2], 0.8817);
}

TEST(TtaCurveTest, FinalAccuracyIsTheFinalRecordsElseTheLast) {
  std::vector<EvalPoint> points(2);
  points[0].accuracy = 0.8;
  points[1].accuracy = 0.7;
  EXPECT_DOUBLE_EQ(FinalAccuracy(points).value(), 0.7);
  points[0].final = true;
  EXPECT_DOUBLE_EQ(FinalAccuracy(points).value(), 0.8);
  EXPECT_FALSE(FinalAccuracy({}).has_value());
}

TEST(TtaCurveTest, RejectsARecordWithoutItsFigures) {
  absl::StatusOr<std::vector<EvalPoint>> bad =
      ParseMetricsLines("{\"time\": 1, \"step\": 2, \"accuracy\": 0.5}\n{\"time\": 3}\n", 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status();
  EXPECT_NE(bad.status().message().find("\"step\""), std::string::npos) << bad.status();
  EXPECT_FALSE(ParseMetricsLines("not json\n", 0).ok());
}

TEST(TtaCurveTest, SummarizesWithNeverAsInfinity) {
  Spread all = Summarize({3.0, 1.0, 2.0});
  EXPECT_EQ(all.runs, 3);
  EXPECT_EQ(all.present, 3);
  EXPECT_DOUBLE_EQ(all.median.value(), 2.0);
  EXPECT_DOUBLE_EQ(all.min.value(), 1.0);
  EXPECT_DOUBLE_EQ(all.max.value(), 3.0);

  Spread one_missed = Summarize({3.0, std::nullopt, 1.0});
  EXPECT_EQ(one_missed.present, 2);
  EXPECT_DOUBLE_EQ(one_missed.median.value(), 3.0);
  EXPECT_DOUBLE_EQ(one_missed.min.value(), 1.0);
  EXPECT_FALSE(one_missed.max.has_value());

  Spread mostly_missed = Summarize({std::nullopt, 2.0, std::nullopt});
  EXPECT_FALSE(mostly_missed.median.has_value());
  EXPECT_DOUBLE_EQ(mostly_missed.min.value(), 2.0);

  Spread even = Summarize({4.0, 1.0, 2.0, 3.0});
  EXPECT_DOUBLE_EQ(even.median.value(), 2.5);
  EXPECT_FALSE(Summarize({1.0, std::nullopt}).median.has_value());
  EXPECT_EQ(Summarize({}).runs, 0);
}

}  // namespace
}  // namespace bench
}  // namespace shardps
