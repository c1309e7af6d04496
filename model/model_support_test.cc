#include "model/model_support.h"

#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace shardps {
namespace {

struct FakeCompute {
  std::string Name() const { return "fake (1 thread)"; }
};
struct OtherCompute {
  std::string Name() const { return "other"; }
};

TEST(OwnedModelComputeTest, ReportsItsComputesNameAndFindsItAgain) {
  OwnedModelCompute<FakeCompute> owned(std::make_unique<FakeCompute>());
  EXPECT_EQ(owned.Name(), "fake (1 thread)");
  EXPECT_EQ(OwnedModelCompute<FakeCompute>::Of(&owned), owned.compute());
  EXPECT_NE(owned.compute(), nullptr);
}

TEST(OwnedModelComputeTest, FindsNothingInAnotherModelsComputeOrNone) {
  OwnedModelCompute<OtherCompute> other(std::make_unique<OtherCompute>());
  EXPECT_EQ(OwnedModelCompute<FakeCompute>::Of(&other), nullptr);
  EXPECT_EQ(OwnedModelCompute<FakeCompute>::Of(nullptr), nullptr);
}

TEST(DenseLayerVariableTest, KernelsTakeTheJobsInitializerAndBiasesZeros) {
  JobSpec job;
  job.mutable_kernel_initializer()->set_type(InitializerSpec::RANDOM_UNIFORM);
  const VariableInfo kernel = DenseLayerVariable("dense_0/kernel", {4, 3}, job);
  EXPECT_EQ(kernel.name, "dense_0/kernel");
  EXPECT_EQ(kernel.shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(kernel.access, VariableAccess::kDense);
  EXPECT_FALSE(kernel.dynamic);
  EXPECT_EQ(kernel.initializer.type(), InitializerSpec::RANDOM_UNIFORM);
  const VariableInfo bias = DenseLayerVariable("dense_0/bias", {3}, job);
  EXPECT_EQ(bias.access, VariableAccess::kDense);
  EXPECT_EQ(bias.initializer.type(), InitializerSpec::ZEROS);
}

TEST(ModelErrorsTest, NameTheModelAndTheComputeOrNone) {
  OwnedModelCompute<OtherCompute> other(std::make_unique<OtherCompute>());
  const absl::Status s = ComputeNotMine("mlp:8", &other);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "model \"mlp:8\" needs a compute made by its NewCompute; got \"other\"");
  EXPECT_EQ(ComputeNotMine("mlp:8", nullptr).message(),
            "model \"mlp:8\" needs a compute made by its NewCompute; got none");
  EXPECT_EQ(BatchNotPrepared().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(BatchNotPrepared().message(), "the step's batch was not prepared for this model");
}

struct FakeBatch : public ModelBatch {
  int value = 7;
};
struct OtherBatch : public ModelBatch {};

TEST(PreparedBatchTest, FindsTheBatchOnlyWithBuffersForEveryVariable) {
  const std::vector<VariableInfo> variables(2);
  StepBuffers step;
  step.batch = std::make_unique<FakeBatch>();
  EXPECT_EQ(PreparedBatch<FakeBatch>(variables, step), nullptr);  // not sized
  step.values.resize(2);
  step.grads.resize(2);
  FakeBatch* batch = PreparedBatch<FakeBatch>(variables, step);
  ASSERT_NE(batch, nullptr);
  EXPECT_EQ(batch->value, 7);
  const StepBuffers& const_step = step;
  EXPECT_EQ(PreparedBatch<FakeBatch>(variables, const_step), batch);
  EXPECT_EQ(PreparedBatch<OtherBatch>(variables, step), nullptr);  // another model's
  step.batch.reset();
  EXPECT_EQ(PreparedBatch<FakeBatch>(variables, step), nullptr);
}

}  // namespace
}  // namespace shardps
