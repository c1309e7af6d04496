// Tests of the evaluator's metrics.
#include "evaluator/eval_gauges.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

TEST(EvalGaugesTest, EachEvaluationSetsThem) {
  metrics::Registry registry;
  absl::StatusOr<std::unique_ptr<EvalGauges>> gauges = EvalGauges::Create(&registry);
  ASSERT_TRUE(gauges.ok()) << gauges.status();
  EvalRecord record;
  record.metrics.set_accuracy(0.5);
  record.metrics.set_loss(1.25);
  record.metrics.set_auc(0.7);
  record.metrics.set_step(40);
  record.metrics.set_examples(1000);
  (*gauges)->Record(record);
  record.metrics.set_accuracy(0.75);
  (*gauges)->Record(record);
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("shardps_evaluator_accuracy 0.75\n"));
  EXPECT_THAT(text, HasSubstr("shardps_evaluator_loss 1.25\n"));
  EXPECT_THAT(text, HasSubstr("shardps_evaluator_auc 0.7\n"));
  EXPECT_THAT(text, HasSubstr("shardps_evaluator_evaluated_step 40\n"));
  EXPECT_THAT(text, HasSubstr("shardps_evaluator_evaluations_total 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_evaluator_examples_total 2000\n"));
}

}  // namespace
}  // namespace shardps
