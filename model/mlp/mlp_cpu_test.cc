#include "model/mlp/mlp_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

// A model's parameters, inputs and gradient buffers, randomly filled.
struct Problem {
  MlpSpec spec;
  int batch = 0;
  std::vector<std::vector<float>> params, grads;
  std::vector<float> features;
  std::vector<int32_t> labels;

  Problem(MlpSpec s, int b, uint32_t seed) : spec(std::move(s)), batch(b) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    for (const ParamInfo& info : Params(spec)) {
      std::vector<float> p(info.num_elements());
      const float scale = info.shape.size() == 2 ? std::sqrt(3.0f / info.shape[0]) : 0.1f;
      for (float& v : p) v = uniform(gen) * scale;
      params.push_back(std::move(p));
      grads.emplace_back(info.num_elements(), -7.0f);  // Overwritten by the compute.
    }
    features.resize(int64_t{batch} * spec.input_dim);
    for (float& v : features) v = uniform(gen);
    std::uniform_int_distribution<int> label(0, spec.num_classes - 1);
    for (int i = 0; i < batch; ++i) labels.push_back(label(gen));
  }

  std::vector<const float*> ParamPtrs() const {
    std::vector<const float*> v;
    for (const auto& p : params) v.push_back(p.data());
    return v;
  }
  std::vector<float*> GradPtrs() {
    std::vector<float*> v;
    for (auto& g : grads) v.push_back(g.data());
    return v;
  }
  absl::Status Step(MlpCompute* backend, StepResult* out) {
    return backend->ForwardBackward(spec, ParamPtrs(), features.data(), labels.data(), batch,
                                    out, GradPtrs());
  }
};

// The mean softmax cross-entropy in double precision, straight from the definition.
double ReferenceLoss(const MlpSpec& spec, const std::vector<std::vector<double>>& params,
                     const std::vector<float>& features, const std::vector<int32_t>& labels,
                     int batch) {
  const std::vector<int> dims = spec.LayerDims();
  double total = 0;
  for (int i = 0; i < batch; ++i) {
    std::vector<double> a(features.begin() + int64_t{i} * dims[0],
                          features.begin() + int64_t{i + 1} * dims[0]);
    for (int l = 0; l + 1 < static_cast<int>(dims.size()); ++l) {
      std::vector<double> z(params[2 * l + 1]);
      for (int k = 0; k < dims[l]; ++k) {
        for (int j = 0; j < dims[l + 1]; ++j) z[j] += a[k] * params[2 * l][k * dims[l + 1] + j];
      }
      if (l + 2 < static_cast<int>(dims.size())) {
        for (double& v : z) v = std::max(v, 0.0);
      }
      a = std::move(z);
    }
    const double max = *std::max_element(a.begin(), a.end());
    double sum = 0;
    for (double v : a) sum += std::exp(v - max);
    total += std::log(sum) + max - a[labels[i]];
  }
  return total / batch;
}

// Checks the backend's loss and gradients against the double reference and its central
// finite differences.
void CheckGradients(Problem& problem, MlpCompute* backend) {
  StepResult result;
  ASSERT_TRUE(problem.Step(backend, &result).ok());
  std::vector<std::vector<double>> p64;
  for (const auto& p : problem.params) p64.emplace_back(p.begin(), p.end());
  const double loss = ReferenceLoss(problem.spec, p64, problem.features, problem.labels,
                                    problem.batch);
  EXPECT_NEAR(result.loss, loss, 1e-5 * std::max(1.0, loss));

  const std::vector<ParamInfo> infos = Params(problem.spec);
  constexpr double kStep = 1e-5;
  for (size_t t = 0; t < p64.size(); ++t) {
    for (size_t k = 0; k < p64[t].size(); ++k) {
      const double saved = p64[t][k];
      p64[t][k] = saved + kStep;
      const double up = ReferenceLoss(problem.spec, p64, problem.features, problem.labels,
                                      problem.batch);
      p64[t][k] = saved - kStep;
      const double down = ReferenceLoss(problem.spec, p64, problem.features, problem.labels,
                                        problem.batch);
      p64[t][k] = saved;
      const double numeric = (up - down) / (2 * kStep);
      EXPECT_NEAR(problem.grads[t][k], numeric, 1e-5 + 1e-4 * std::abs(numeric))
          << infos[t].name << "[" << k << "]";
    }
  }
}

TEST(MlpCpuComputeTest, SoftmaxRegressionGradientsMatchFiniteDifferences) {
  Problem problem(MlpSpec{6, {}, 4}, 7, 1);
  CheckGradients(problem, NewMlpCpuCompute(1).get());
}

TEST(MlpCpuComputeTest, MlpGradientsMatchFiniteDifferences) {
  Problem problem(MlpSpec{5, {7, 6}, 3}, 9, 2);
  CheckGradients(problem, NewMlpCpuCompute(1).get());
}

// A batch large enough to be split across threads, whose partial gradients are then summed.
TEST(MlpCpuComputeTest, ThreadedMlpGradientsMatchFiniteDifferences) {
  Problem problem(MlpSpec{5, {8}, 4}, 100, 3);
  CheckGradients(problem, NewMlpCpuCompute(3).get());
}

TEST(MlpCpuComputeTest, KnownLossOfZeroModel) {
  // All-zero parameters: every logit is 0, the loss is log(C) whatever the labels, every
  // prediction is class 0 (the first of equal logits), and the bias gradient is
  // 1/C - (fraction of labels equal to the class).
  Problem problem(MlpSpec{3, {}, 4}, 4, 4);
  for (auto& p : problem.params) std::fill(p.begin(), p.end(), 0.0f);
  problem.labels = {0, 2, 2, 3};
  StepResult result;
  ASSERT_TRUE(problem.Step(NewMlpCpuCompute(1).get(), &result).ok());
  EXPECT_FLOAT_EQ(result.loss, std::log(4.0f));
  EXPECT_EQ(result.correct, 1);
  EXPECT_THAT(problem.grads[1], ::testing::Pointwise(::testing::FloatEq(),
                                                     {0.0f, 0.25f, -0.25f, 0.0f}));
}

TEST(MlpCpuComputeTest, HugeLogitsStayFinite) {
  Problem problem(MlpSpec{2, {}, 3}, 2, 5);
  problem.params[0] = {1000, -1000, 0, 0, 0, 0};
  problem.params[1] = {0, 0, 0};
  problem.features = {1, 0, 1, 0};
  problem.labels = {1, 0};
  StepResult result;
  ASSERT_TRUE(problem.Step(NewMlpCpuCompute(1).get(), &result).ok());
  EXPECT_NEAR(result.loss, 1000.0f, 1e-3);  // Mean of 2000 and ~0.
  EXPECT_EQ(result.correct, 1);
  for (const auto& g : problem.grads) {
    for (float v : g) EXPECT_TRUE(std::isfinite(v));
  }
}

TEST(MlpCpuComputeTest, RepeatedCallsAreBitIdentical) {
  Problem problem(MlpSpec{20, {16, 8}, 5}, 200, 6);
  std::unique_ptr<MlpCompute> a = NewMlpCpuCompute(4), b = NewMlpCpuCompute(4);
  StepResult r1, r2, r3;
  ASSERT_TRUE(problem.Step(a.get(), &r1).ok());
  const std::vector<std::vector<float>> first = problem.grads;
  ASSERT_TRUE(problem.Step(a.get(), &r2).ok());
  EXPECT_EQ(problem.grads, first);
  ASSERT_TRUE(problem.Step(b.get(), &r3).ok());
  EXPECT_EQ(problem.grads, first);
  EXPECT_EQ(r1.loss, r2.loss);
  EXPECT_EQ(r1.loss, r3.loss);
  EXPECT_EQ(r1.correct, r3.correct);
}

TEST(MlpCpuComputeTest, ThreadCountChangesOnlyRounding) {
  Problem problem(MlpSpec{20, {16}, 5}, 300, 7);
  StepResult one, many;
  ASSERT_TRUE(problem.Step(NewMlpCpuCompute(1).get(), &one).ok());
  const std::vector<std::vector<float>> single = problem.grads;
  ASSERT_TRUE(problem.Step(NewMlpCpuCompute(5).get(), &many).ok());
  EXPECT_NEAR(one.loss, many.loss, 1e-6);
  EXPECT_EQ(one.correct, many.correct);
  for (size_t t = 0; t < single.size(); ++t) {
    for (size_t k = 0; k < single[t].size(); ++k) {
      EXPECT_NEAR(problem.grads[t][k], single[t][k], 1e-6);
    }
  }
}

TEST(MlpCpuComputeTest, EvaluateMatchesForwardBackward) {
  Problem problem(MlpSpec{10, {12}, 4}, 77, 8);
  std::unique_ptr<MlpCompute> backend = NewMlpCpuCompute(2);
  StepResult step;
  ASSERT_TRUE(problem.Step(backend.get(), &step).ok());
  EvalResult eval;
  ASSERT_TRUE(backend
                  ->Evaluate(problem.spec, problem.ParamPtrs(), problem.features.data(),
                             problem.labels.data(), problem.batch, &eval)
                  .ok());
  EXPECT_FLOAT_EQ(static_cast<float>(eval.loss_sum / problem.batch), step.loss);
  EXPECT_EQ(eval.correct, step.correct);
  EXPECT_EQ(eval.num_examples, 77);
}

TEST(MlpCpuComputeTest, RejectsBadArguments) {
  Problem problem(MlpSpec{4, {3}, 3}, 5, 9);
  std::unique_ptr<MlpCompute> backend = NewMlpCpuCompute(1);
  StepResult out;
  std::vector<const float*> params = problem.ParamPtrs();
  std::vector<float*> grads = problem.GradPtrs();
  const float* x = problem.features.data();
  const int32_t* y = problem.labels.data();

  absl::Status s = backend->ForwardBackward(problem.spec, absl::MakeSpan(params).subspan(0, 3), x,
                                            y, 5, &out, grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("has 4 parameters, got 3"));

  s = backend->ForwardBackward(problem.spec, params, x, y, 5, &out,
                               absl::MakeSpan(grads).subspan(1));
  EXPECT_THAT(s.message(), HasSubstr("got 3 gradient buffers"));

  std::vector<float*> null_grad = grads;
  null_grad[3] = nullptr;
  s = backend->ForwardBackward(problem.spec, params, x, y, 5, &out, null_grad);
  EXPECT_THAT(s.message(), HasSubstr("dense_1/bias"));

  s = backend->ForwardBackward(problem.spec, params, x, y, 0, &out, grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("batch must be > 0, got 0"));

  problem.labels[3] = 3;
  s = backend->ForwardBackward(problem.spec, params, x, y, 5, &out, grads);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("label 3 at batch index 3 is outside [0, 3)"));
  problem.labels[3] = -1;
  EvalResult eval;
  s = backend->Evaluate(problem.spec, params, x, y, 5, &eval);
  EXPECT_THAT(s.message(), HasSubstr("label -1 at batch index 3"));

  s = backend->ForwardBackward(MlpSpec{4, {3}, 1}, params, x, y, 5, &out, grads);
  EXPECT_THAT(s.message(), HasSubstr("num_classes"));
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// Copies `src` into a buffer whose data starts `offset` floats past a 64-byte boundary.
struct Shifted {
  std::vector<float> storage;
  float* data;
  Shifted(const std::vector<float>& src, int offset) : storage(src.size() + 32) {
    uintptr_t p = reinterpret_cast<uintptr_t>(storage.data());
    uintptr_t aligned = (p + 63) & ~uintptr_t{63};
    data = reinterpret_cast<float*>(aligned) + offset;
    std::copy(src.begin(), src.end(), data);
  }
};

// Sync training is reproducible only if a step's result does not depend on where the
// caller's buffers happen to sit in memory.
TEST(MlpCpuComputeDeterminismTest, ResultsDoNotDependOnBufferAlignment) {
  MlpSpec spec{784, {128}, 10};
  Problem problem(spec, 64, 5);
  auto backend = NewMlpCpuCompute(1);
  std::vector<std::vector<float>> reference;
  float reference_loss = 0;
  for (int offset = 0; offset < 8; ++offset) {
    std::vector<Shifted> params, grads;
    std::vector<const float*> param_ptrs;
    std::vector<float*> grad_ptrs;
    for (size_t i = 0; i < problem.params.size(); ++i) {
      params.emplace_back(problem.params[i], offset);
      grads.emplace_back(problem.grads[i], (offset + 3) % 8);
    }
    for (auto& p : params) param_ptrs.push_back(p.data);
    for (auto& g : grads) grad_ptrs.push_back(g.data);
    Shifted features(problem.features, (offset + 5) % 8);
    StepResult result;
    ASSERT_TRUE(backend
                    ->ForwardBackward(spec, param_ptrs, features.data, problem.labels.data(),
                                      problem.batch, &result, grad_ptrs)
                    .ok());
    std::vector<std::vector<float>> got;
    for (size_t i = 0; i < grads.size(); ++i) {
      got.emplace_back(grads[i].data, grads[i].data + problem.grads[i].size());
    }
    if (offset == 0) {
      reference = got;
      reference_loss = result.loss;
      continue;
    }
    EXPECT_EQ(result.loss, reference_loss) << "offset " << offset;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(0, std::memcmp(got[i].data(), reference[i].data(), got[i].size() * 4))
          << "gradient " << i << " differs at offset " << offset;
    }
  }
}

}  // namespace
}  // namespace shardps
