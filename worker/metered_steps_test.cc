// Tests of the metered step executor over a fake one.
#include "worker/metered_steps.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

class FakeSteps : public StepExecutor {
 public:
  absl::StatusOr<StartJobResponse> StartJob(const StartJobRequest&) override {
    return StartJobResponse();
  }
  absl::StatusOr<StepResponse> RunStep(const StepRequest& request) override {
    if (request.step_id() < 0) return absl::UnavailableError("ps down");
    StepResponse step;
    step.set_examples(32);
    step.set_pull_ms(1);
    step.set_compute_ms(30);
    step.set_push_ms(2);
    step.set_loss(0.5);
    return step;
  }
  WorkerStatusResponse Status() override { return WorkerStatusResponse(); }
  std::string BackendName() override { return "fake"; }
};

TEST(MeteredStepsTest, CountsStepsExamplesAndPhases) {
  metrics::Registry registry;
  absl::StatusOr<std::unique_ptr<StepExecutor>> steps =
      NewMeteredStepExecutor(std::make_unique<FakeSteps>(), &registry);
  ASSERT_TRUE(steps.ok()) << steps.status();
  StepRequest request;
  request.set_step_id(1);
  ASSERT_TRUE((*steps)->RunStep(request).ok());
  ASSERT_TRUE((*steps)->RunStep(request).ok());
  request.set_step_id(-1);
  EXPECT_FALSE((*steps)->RunStep(request).ok());
  EXPECT_EQ((*steps)->BackendName(), "fake");
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("shardps_worker_steps_total{outcome=\"ok\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_worker_steps_total{outcome=\"failed\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_worker_examples_total 64\n"));
  EXPECT_THAT(text, HasSubstr("shardps_worker_step_phase_seconds_sum{phase=\"compute\"} 0.06\n"));
  EXPECT_THAT(text, HasSubstr("shardps_worker_step_phase_seconds_count{phase=\"push\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_worker_loss 0.5\n"));
}

}  // namespace
}  // namespace shardps
