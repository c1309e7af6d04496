// The CUDA DlrmCompute against the CPU one: loss, logits, probabilities and every gradient
// agree within 1e-4 relative. Skips, saying why, where no CUDA device is visible; tagged
// "gpu" so that CPU-only runs leave it out.
//
// Row gradients on the GPU are summed with atomicAdd, in an order the hardware picks, so they
// are compared within the tolerance, never bit for bit; everything else on the GPU is
// deterministic, which the test checks by running a step twice.
#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "compute/cuda_device.h"
#include "gtest/gtest.h"
#include "model/dlrm/dlrm_cpu.h"
#include "model/dlrm/dlrm_cuda.h"
#include "model/dlrm/dlrm_test_util.h"

namespace shardps {
namespace {

constexpr double kRelTol = 1e-4;

// Each element within kRelTol of the CPU's, relative to the larger of its magnitude and 1% of
// the largest magnitude in the tensor (elements that cancel to near zero are judged on the
// tensor's scale).
void ExpectClose(const std::vector<float>& gpu, const std::vector<float>& cpu,
                 const std::string& what) {
  ASSERT_EQ(gpu.size(), cpu.size()) << what;
  float scale = 0;
  for (float v : cpu) scale = std::max(scale, std::abs(v));
  int bad = 0;
  for (size_t k = 0; k < cpu.size(); ++k) {
    const double tol = kRelTol * std::max<double>(std::abs(cpu[k]), 0.01 * scale) + 1e-12;
    if (!(std::abs(gpu[k] - cpu[k]) <= tol) && ++bad <= 5) {
      ADD_FAILURE() << what << "[" << k << "]: gpu " << gpu[k] << " cpu " << cpu[k];
    }
  }
  EXPECT_EQ(bad, 0) << what;
}

DlrmSpec Spec(DlrmInteraction interaction, DlrmPooling pooling, int num_dense, bool bottom) {
  DlrmSpec spec;
  spec.num_dense = num_dense;
  if (bottom && num_dense > 0) spec.bottom = {64, 8};
  spec.top = {48, 16};
  spec.interaction = interaction;
  for (int t = 0; t < 5; ++t) {
    spec.tables.push_back({"t" + std::to_string(t), 0, num_dense > 0 && !bottom ? num_dense : 8,
                           t == 1 ? DlrmPooling::kMean : pooling});
  }
  return spec;
}

class DlrmGpuTest
    : public ::testing::TestWithParam<std::tuple<DlrmInteraction, DlrmPooling, int, bool>> {
 protected:
  void SetUp() override {
    if (CudaDeviceCount() == 0) {
      GTEST_SKIP() << "no CUDA device visible (no GPU or no driver): the GPU DLRM compute "
                      "cannot run here";
    }
  }
};

TEST_P(DlrmGpuTest, AgreesWithCpu) {
  const auto [interaction, pooling, num_dense, bottom] = GetParam();
  const DlrmSpec spec = Spec(interaction, pooling, num_dense, bottom);
  ASSERT_TRUE(ValidateDlrmSpec(spec).ok()) << ValidateDlrmSpec(spec);
  // 600 examples over 30 rows per table: rows repeat across examples, and often.
  const DlrmProblem p = MakeDlrmProblem(spec, 600, 30, 6, 17);
  auto gpu = NewDlrmCudaCompute(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto cpu = NewDlrmCpuCompute(1);
  const auto params = p.ParamSpans();

  DlrmStepOutput c, g, g2;
  ASSERT_TRUE(cpu->ForwardBackward(spec, params, p.View(), &c).ok());
  ASSERT_TRUE((*gpu)->ForwardBackward(spec, params, p.View(), &g).ok());
  EXPECT_NEAR(g.loss, c.loss, kRelTol * std::abs(c.loss));
  ExpectClose(g.logits, c.logits, "logits");
  const std::vector<DlrmParamInfo> infos = DlrmDenseParams(spec);
  ASSERT_EQ(g.dense_grads.size(), infos.size());
  for (size_t i = 0; i < infos.size(); ++i) ExpectClose(g.dense_grads[i], c.dense_grads[i], infos[i].name);
  ASSERT_EQ(g.row_grads.size(), spec.tables.size());
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    ExpectClose(g.row_grads[t], c.row_grads[t], "row gradients of " + spec.tables[t].name);
  }

  // Again: everything but the atomically summed row gradients is bit-identical.
  ASSERT_TRUE((*gpu)->ForwardBackward(spec, params, p.View(), &g2).ok());
  EXPECT_EQ(g.loss, g2.loss);
  EXPECT_EQ(g.logits, g2.logits);
  EXPECT_EQ(g.dense_grads, g2.dense_grads);
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    ExpectClose(g2.row_grads[t], c.row_grads[t], "row gradients (again) of " + spec.tables[t].name);
  }

  DlrmEvalOutput ce, ge;
  ASSERT_TRUE(cpu->Evaluate(spec, params, p.View(), &ce).ok());
  ASSERT_TRUE((*gpu)->Evaluate(spec, params, p.View(), &ge).ok());
  EXPECT_NEAR(ge.loss_sum, ce.loss_sum, kRelTol * std::abs(ce.loss_sum));
  EXPECT_EQ(ge.num_examples, p.batch);
  ExpectClose(ge.probabilities, ce.probabilities, "probabilities");
}

INSTANTIATE_TEST_SUITE_P(
    All, DlrmGpuTest,
    ::testing::Values(std::make_tuple(DlrmInteraction::kConcat, DlrmPooling::kSum, 13, true),
                      std::make_tuple(DlrmInteraction::kConcat, DlrmPooling::kMean, 13, true),
                      std::make_tuple(DlrmInteraction::kDot, DlrmPooling::kSum, 13, true),
                      std::make_tuple(DlrmInteraction::kDot, DlrmPooling::kMean, 13, true),
                      std::make_tuple(DlrmInteraction::kDot, DlrmPooling::kSum, 8, false),
                      std::make_tuple(DlrmInteraction::kDot, DlrmPooling::kSum, 0, false),
                      std::make_tuple(DlrmInteraction::kConcat, DlrmPooling::kSum, 0, false)));

TEST(DlrmGpuErrorsTest, RejectsBadShapesLikeTheCpu) {
  if (CudaDeviceCount() == 0) {
    GTEST_SKIP() << "no CUDA device visible: the GPU DLRM compute cannot run here";
  }
  const DlrmSpec spec = Spec(DlrmInteraction::kDot, DlrmPooling::kSum, 13, true);
  const DlrmProblem p = MakeDlrmProblem(spec, 8, 4, 2, 3);
  auto gpu = NewDlrmCudaCompute(0);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  DlrmBatch b = p.View();
  b.tables[2].rows = b.tables[2].rows.subspan(1);
  DlrmStepOutput out;
  const absl::Status s = (*gpu)->ForwardBackward(spec, p.ParamSpans(), b, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("table \"t2\""), std::string::npos) << s;
}

TEST(DlrmCudaTest, NoDeviceIsFailedPrecondition) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a CUDA device is visible";
  auto gpu = NewDlrmCudaCompute(0);
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace shardps
