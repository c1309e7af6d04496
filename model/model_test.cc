#include "model/model.h"

#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compute/compute_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/mlp/mlp_compute.h"
#include "model/mlp/mlp_cpu.h"
#include "model/mlp/mlp_spec.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

// A 4-example dataset of 3 features and 2 classes.
class TinySource : public DataSource {
 public:
  TinySource() {
    info_.name = "tiny";
    info_.num_examples = 4;
    info_.feature_dim = 3;
    info_.num_classes = 2;
    data_.num_examples = 4;
    data_.feature_dim = 3;
    data_.num_classes = 2;
    for (int i = 0; i < 12; ++i) data_.features.push_back(0.1f * static_cast<float>(i));
    data_.labels = {0, 1, 1, 0};
  }
  const DatasetInfo& info() const override { return info_; }
  const Dataset* dense() const override { return &data_; }

 private:
  DatasetInfo info_;
  Dataset data_;
};

class NoDenseSource : public DataSource {
 public:
  const DatasetInfo& info() const override { return info_; }

 private:
  DatasetInfo info_{"ctr_only", "", Split::kTrain, 4, 3, 2};
};

JobSpec MlpJob(const std::string& model) {
  JobSpec job;
  job.set_model(model);
  job.mutable_kernel_initializer()->set_type(InitializerSpec::RANDOM_NORMAL);
  job.mutable_kernel_initializer()->set_stddev(0.3);
  return job;
}

TEST(ModelTest, MlpDeclaresDenseVariablesWithInitializersByRole) {
  TinySource data;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(MlpJob("mlp:5"), data.info());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->ToString(), "mlp:5");
  const std::vector<VariableInfo>& vars = (*model)->variables();
  ASSERT_EQ(vars.size(), 4u);
  EXPECT_EQ(vars[0].name, "dense_0/kernel");
  EXPECT_EQ(vars[0].shape, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(vars[0].row_width(), 5);
  EXPECT_EQ(vars[1].name, "dense_0/bias");
  EXPECT_EQ(vars[3].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(vars[3].row_width(), 1);
  for (const VariableInfo& v : vars) {
    EXPECT_EQ(v.access, VariableAccess::kDense) << v.name;
    const bool kernel = v.name.find("kernel") != std::string::npos;
    EXPECT_EQ(v.initializer.type(),
              kernel ? InitializerSpec::RANDOM_NORMAL : InitializerSpec::ZEROS)
        << v.name;
  }
  EXPECT_EQ(vars[2].initializer.stddev(), 0.3);
}

TEST(ModelTest, MlpStepComputesWhatTheBackendComputesOnTheGatheredBatch) {
  TinySource data;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(MlpJob("softmax"), data.info());
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<ModelCompute>> compute =
      (*model)->NewCompute(ComputeDevice::Cpu(1));
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_EQ((*compute)->Name(), "cpu (Eigen, 1 thread)");
  std::unique_ptr<MlpCompute> backend = NewMlpCpuCompute(1);

  StepBuffers step;
  const std::vector<int64_t> indices = {2, 0};
  ASSERT_TRUE((*model)->PrepareBatch(data, indices, &step).ok());
  EXPECT_EQ(step.batch_size, 2);
  ASSERT_EQ(step.values.size(), 2u);
  EXPECT_EQ(step.values[0].size(), 6u);  // kernel 3 x 2
  EXPECT_EQ(step.grads[1].size(), 2u);
  EXPECT_TRUE(step.ids[0].empty());
  for (size_t i = 0; i < step.values[0].size(); ++i) step.values[0][i] = 0.1f * (i + 1);
  step.values[1] = {0.5f, -0.5f};
  StepResult result;
  ASSERT_TRUE((*model)->ForwardBackward(compute->get(), &step, &result).ok());

  // The same compute straight on the backend, with the examples gathered by hand.
  absl::StatusOr<MlpSpec> spec = ParseMlpSpec("softmax", 3, 2);
  ASSERT_TRUE(spec.ok());
  const Dataset& d = *data.dense();
  std::vector<float> features;
  for (int64_t i : indices) {
    features.insert(features.end(), d.features.begin() + i * 3, d.features.begin() + i * 3 + 3);
  }
  const std::vector<int32_t> labels = {d.labels[2], d.labels[0]};
  std::vector<float> g0(6), g1(2);
  std::vector<const float*> params = {step.values[0].data(), step.values[1].data()};
  std::vector<float*> grads = {g0.data(), g1.data()};
  StepResult direct;
  ASSERT_TRUE(
      backend->ForwardBackward(*spec, params, features.data(), labels.data(), 2, &direct, grads)
          .ok());
  EXPECT_EQ(result.loss, direct.loss);
  EXPECT_EQ(result.correct, direct.correct);
  EXPECT_EQ(step.grads[0], g0);
  EXPECT_EQ(step.grads[1], g1);

  BatchEval eval;
  ASSERT_TRUE((*model)->Evaluate(compute->get(), step, &eval).ok());
  EXPECT_EQ(eval.totals.num_examples, 2);
  EXPECT_FLOAT_EQ(static_cast<float>(eval.totals.loss_sum / 2), direct.loss);
  EXPECT_TRUE(eval.scores.empty());

  // A reused StepBuffers keeps its buffers' storage.
  const float* kernel = step.values[0].data();
  ASSERT_TRUE((*model)->PrepareBatch(data, {1, 3}, &step).ok());
  EXPECT_EQ(step.values[0].data(), kernel);
}

TEST(ModelTest, BadModelTextAndWrongDataAreNamed) {
  TinySource data;
  absl::StatusOr<std::unique_ptr<Model>> bad = Model::Create(MlpJob("mlp:0"), data.info());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("model"));

  absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(MlpJob("softmax"), data.info());
  ASSERT_TRUE(model.ok());
  StepBuffers step;
  absl::Status s = (*model)->PrepareBatch(NoDenseSource(), {0}, &step);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("ctr_only"));
  s = (*model)->PrepareBatch(data, {0, 4}, &step);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("position 1"));

  StepBuffers unprepared;
  StepResult result;
  absl::StatusOr<std::unique_ptr<ModelCompute>> compute =
      (*model)->NewCompute(ComputeDevice::Cpu(1));
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_EQ((*model)->ForwardBackward(compute->get(), &unprepared, &result).code(),
            absl::StatusCode::kFailedPrecondition);
}

JobSpec DlrmJob() {
  JobSpec job;
  job.set_model("dlrm:bottom=4;top=8;dim=4");
  job.mutable_kernel_initializer()->set_type(InitializerSpec::GLOROT_UNIFORM);
  job.set_seed(3);
  return job;
}

// Tables of a vocabulary are fixed [vocab, dim] variables; tables of hashed ids (vocab 0) are
// dynamic [0, dim] ones, and a batch names their raw keys.
TEST(ModelTest, DlrmHashedFeaturesBecomeDynamicTablesKeyedByTheirIds) {
  for (const bool hashed : {false, true}) {
    const std::string name = absl::StrCat("synthetic_ctr:examples=64,dense=2,tables=2,vocab=50,",
                                          "seed=5,ids=", hashed ? "hashed" : "range");
    absl::StatusOr<std::shared_ptr<const DataSource>> data =
        LoadDataSource(name, "", Split::kTrain);
    ASSERT_TRUE(data.ok()) << data.status();
    absl::StatusOr<std::unique_ptr<Model>> model = Model::Create(DlrmJob(), (*data)->info());
    ASSERT_TRUE(model.ok()) << model.status();
    int tables = 0;
    for (const VariableInfo& v : (*model)->variables()) {
      if (v.access != VariableAccess::kRows) {
        EXPECT_FALSE(v.dynamic) << v.name;
        continue;
      }
      ++tables;
      EXPECT_EQ(v.dynamic, hashed) << v.name;
      EXPECT_EQ(v.shape, (std::vector<int64_t>{hashed ? 0 : 50, 4})) << v.name;
      EXPECT_EQ(v.row_width(), 4) << v.name;
    }
    EXPECT_EQ(tables, 2);
    StepBuffers step;
    ASSERT_TRUE((*model)->PrepareBatch(**data, {0, 1, 2, 3, 4, 5, 6, 7}, &step).ok());
    bool out_of_vocab = false;
    for (size_t v = 0; v < step.ids.size(); ++v) {
      if ((*model)->variables()[v].access != VariableAccess::kRows) continue;
      EXPECT_FALSE(step.ids[v].empty());
      for (int64_t id : step.ids[v]) out_of_vocab |= id < 0 || id >= 50;
      EXPECT_EQ(step.values[v].size(), step.ids[v].size() * 4);
    }
    EXPECT_EQ(out_of_vocab, hashed) << "hashed ids are 64-bit keys, range ids are < vocab";
  }
}

// A model computes only on a compute that a model of its kind made.
TEST(ModelTest, ComputeOfAnotherModelOrNoneIsRefusedByName) {
  TinySource data;
  absl::StatusOr<std::unique_ptr<Model>> mlp = Model::Create(MlpJob("softmax"), data.info());
  ASSERT_TRUE(mlp.ok()) << mlp.status();
  StepBuffers step;
  ASSERT_TRUE((*mlp)->PrepareBatch(data, {0, 1}, &step).ok());
  StepResult result;
  absl::Status s = (*mlp)->ForwardBackward(nullptr, &step, &result);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("got none"));

  absl::StatusOr<std::shared_ptr<const DataSource>> ctr = LoadDataSource(
      "synthetic_ctr:examples=64,dense=2,tables=2,vocab=50,seed=5", "", Split::kTrain);
  ASSERT_TRUE(ctr.ok()) << ctr.status();
  absl::StatusOr<std::unique_ptr<Model>> dlrm = Model::Create(DlrmJob(), (*ctr)->info());
  ASSERT_TRUE(dlrm.ok()) << dlrm.status();
  absl::StatusOr<std::unique_ptr<ModelCompute>> dlrm_compute =
      (*dlrm)->NewCompute(ComputeDevice::Cpu(2));
  ASSERT_TRUE(dlrm_compute.ok()) << dlrm_compute.status();
  EXPECT_EQ((*dlrm_compute)->Name(), "cpu (Eigen, 2 threads)");
  s = (*mlp)->ForwardBackward(dlrm_compute->get(), &step, &result);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("\"cpu (Eigen, 2 threads)\""));
  BatchEval eval;
  EXPECT_EQ((*mlp)->Evaluate(dlrm_compute->get(), step, &eval).code(),
            absl::StatusCode::kFailedPrecondition);

  StepBuffers ctr_step;
  ASSERT_TRUE((*dlrm)->PrepareBatch(**ctr, {0, 1, 2, 3}, &ctr_step).ok());
  absl::StatusOr<std::unique_ptr<ModelCompute>> mlp_compute =
      (*mlp)->NewCompute(ComputeDevice::Cpu(1));
  ASSERT_TRUE(mlp_compute.ok()) << mlp_compute.status();
  EXPECT_EQ((*dlrm)->ForwardBackward(mlp_compute->get(), &ctr_step, &result).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE((*dlrm)->ForwardBackward(dlrm_compute->get(), &ctr_step, &result).ok());
}

}  // namespace
}  // namespace shardps
