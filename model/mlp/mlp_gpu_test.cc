// The CUDA MLP compute against the CPU one. Needs a GPU, and fails (does not skip) without one;
// tagged "gpu" so that CPU-only runs leave it out.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <random>
#include <vector>

#include "compute/cuda_device.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/mlp/mlp_cpu.h"
#include "model/mlp/mlp_cuda.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

struct Problem {
  MlpSpec spec;
  int batch;
  std::vector<std::vector<float>> params;
  std::vector<float> features;
  std::vector<int32_t> labels;

  Problem(MlpSpec s, int b, uint32_t seed) : spec(std::move(s)), batch(b) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (const ParamInfo& info : Params(spec)) {
      std::vector<float> p(info.num_elements());
      // Glorot-uniform kernels, small random biases.
      const float scale = info.shape.size() == 2
                              ? std::sqrt(6.0f / (info.shape[0] + info.shape[1]))
                              : 0.1f;
      for (float& v : p) v = uniform(gen) * scale;
      params.push_back(std::move(p));
    }
    features.resize(int64_t{batch} * spec.input_dim);
    for (float& v : features) v = (uniform(gen) + 1.0f) / 2;
    std::uniform_int_distribution<int> label(0, spec.num_classes - 1);
    for (int i = 0; i < batch; ++i) labels.push_back(label(gen));
  }

  std::vector<const float*> ParamPtrs() const {
    std::vector<const float*> v;
    for (const auto& p : params) v.push_back(p.data());
    return v;
  }
};

struct Output {
  StepResult result;
  std::vector<std::vector<float>> grads;
};

Output Step(MlpCompute* backend, const Problem& problem) {
  Output out;
  std::vector<float*> ptrs;
  for (const ParamInfo& info : Params(problem.spec)) out.grads.emplace_back(info.num_elements(), NAN);
  for (auto& g : out.grads) ptrs.push_back(g.data());
  const absl::Status s =
      backend->ForwardBackward(problem.spec, problem.ParamPtrs(), problem.features.data(),
                               problem.labels.data(), problem.batch, &out.result, ptrs);
  EXPECT_TRUE(s.ok()) << backend->Name() << ": " << s;
  return out;
}

// max |a - b| / max |b|: the error relative to the tensor's scale.
double RelativeError(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(double{a[i]} - b[i]));
    scale = std::max(scale, std::abs(double{b[i]}));
  }
  return scale > 0 ? diff / scale : diff;
}

std::unique_ptr<MlpCompute> Gpu() {
  EXPECT_GT(CudaDeviceCount(), 0) << "no CUDA device: mlp_gpu_test needs a GPU";
  absl::StatusOr<std::unique_ptr<MlpCompute>> gpu = NewMlpCudaCompute();
  EXPECT_TRUE(gpu.ok()) << gpu.status();
  return gpu.ok() ? std::move(*gpu) : nullptr;
}

void ExpectAgree(const Problem& problem, MlpCompute* gpu) {
  const Output cpu_out = Step(NewMlpCpuCompute(4).get(), problem);
  const Output gpu_out = Step(gpu, problem);
  EXPECT_LE(std::abs(gpu_out.result.loss - cpu_out.result.loss),
            1e-4 * std::abs(cpu_out.result.loss));
  EXPECT_EQ(gpu_out.result.correct, cpu_out.result.correct);
  const std::vector<ParamInfo> infos = Params(problem.spec);
  for (size_t t = 0; t < infos.size(); ++t) {
    const double err = RelativeError(gpu_out.grads[t], cpu_out.grads[t]);
    EXPECT_LE(err, 1e-4) << infos[t].name;
    std::cout << infos[t].name << ": relative error " << err << "\n";
  }
}

TEST(MlpGpuTest, MatchesCpuOnMlp784x256x128x10) {
  std::unique_ptr<MlpCompute> gpu = Gpu();
  ASSERT_NE(gpu, nullptr);
  std::cout << "device: " << gpu->Name() << "\n";
  ExpectAgree(Problem(MlpSpec{784, {256, 128}, 10}, 256, 11), gpu.get());
}

TEST(MlpGpuTest, MatchesCpuOnSoftmaxAndOddShapes) {
  std::unique_ptr<MlpCompute> gpu = Gpu();
  ASSERT_NE(gpu, nullptr);
  ExpectAgree(Problem(MlpSpec{784, {}, 10}, 256, 12), gpu.get());
  // Widths that are not multiples of 32, more classes than a warp, buffers that grow.
  ExpectAgree(Problem(MlpSpec{37, {45, 3}, 70}, 13, 13), gpu.get());
  ExpectAgree(Problem(MlpSpec{100, {300}, 10}, 1000, 14), gpu.get());
  ExpectAgree(Problem(MlpSpec{784, {256, 128}, 10}, 1, 15), gpu.get());
}

TEST(MlpGpuTest, EvaluateAndDeterminism) {
  std::unique_ptr<MlpCompute> gpu = Gpu();
  ASSERT_NE(gpu, nullptr);
  const Problem problem(MlpSpec{784, {256, 128}, 10}, 256, 16);
  const Output a = Step(gpu.get(), problem);
  const Output b = Step(gpu.get(), problem);
  EXPECT_EQ(a.result.loss, b.result.loss);
  EXPECT_EQ(a.grads, b.grads);
  EvalResult eval;
  ASSERT_TRUE(gpu->Evaluate(problem.spec, problem.ParamPtrs(), problem.features.data(),
                            problem.labels.data(), problem.batch, &eval)
                  .ok());
  EXPECT_FLOAT_EQ(static_cast<float>(eval.loss_sum / problem.batch), a.result.loss);
  EXPECT_EQ(eval.correct, a.result.correct);
}

TEST(MlpGpuTest, RejectsBadLabel) {
  std::unique_ptr<MlpCompute> gpu = Gpu();
  ASSERT_NE(gpu, nullptr);
  Problem problem(MlpSpec{8, {4}, 3}, 6, 17);
  problem.labels[4] = 9;
  EvalResult eval;
  const absl::Status s = gpu->Evaluate(problem.spec, problem.ParamPtrs(), problem.features.data(),
                                       problem.labels.data(), problem.batch, &eval);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("label 9 at batch index 4"));
}

}  // namespace
}  // namespace shardps
