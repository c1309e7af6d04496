#include "model/external/external_model.h"

#include "compute/compute_device.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

JobSpec ExternalJob() {
  JobSpec job;
  job.set_model(kExternalModel);
  job.set_examples_per_epoch(1000);
  ExternalVariable* kernel = job.add_variables();
  kernel->set_name("dense/kernel");
  kernel->add_shape(4);
  kernel->add_shape(3);
  kernel->mutable_initializer()->set_type(InitializerSpec::GLOROT_UNIFORM);
  ExternalVariable* table = job.add_variables();
  table->set_name("emb");
  table->add_shape(0);
  table->add_shape(8);
  table->set_rows(true);
  ExternalVariable* fixed = job.add_variables();
  fixed->set_name("items");
  fixed->add_shape(50);
  fixed->add_shape(8);
  fixed->set_rows(true);
  return job;
}

TEST(ExternalModelTest, DeclaresTheJobsVariables) {
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(ExternalJob(), DatasetInfo{});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->ToString(), "external");
  const std::vector<VariableInfo>& vars = (*model)->variables();
  ASSERT_EQ(vars.size(), 3u);
  EXPECT_EQ(vars[0].name, "dense/kernel");
  EXPECT_EQ(vars[0].shape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(vars[0].access, VariableAccess::kDense);
  EXPECT_EQ(vars[0].initializer.type(), InitializerSpec::GLOROT_UNIFORM);
  EXPECT_EQ(vars[1].access, VariableAccess::kRows);
  EXPECT_TRUE(vars[1].dynamic);
  EXPECT_EQ(vars[2].access, VariableAccess::kRows);
  EXPECT_FALSE(vars[2].dynamic);
  EXPECT_EQ(ExternalDatasetInfo(ExternalJob()).num_examples, 1000);
}

TEST(ExternalModelTest, ComputesNothingHere) {
  std::unique_ptr<Model> model = *Model::Create(ExternalJob(), DatasetInfo{});
  absl::StatusOr<std::unique_ptr<ModelCompute>> compute =
      model->NewCompute(ComputeDevice::Cpu(1));
  EXPECT_EQ(compute.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(compute.status().message().find("shardps.Worker"), std::string::npos)
      << compute.status();
}

TEST(ExternalModelTest, RefusesAJobWithoutVariables) {
  JobSpec job;
  job.set_model(kExternalModel);
  EXPECT_EQ(Model::Create(job, DatasetInfo{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardps
