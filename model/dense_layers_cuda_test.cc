// The CUDA dense layers against the CPU ones (float rounding apart: cuBLAS sums in its own
// order). Needs a GPU: skips, saying why, where no CUDA device is visible; tagged "gpu".
#include "model/dense_layers_cuda.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/dense_layers_cpu.h"
#include "model/dense_layers_test_util.h"

namespace shardps {
namespace {

class DenseLayersCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::DeviceCount() == 0) GTEST_SKIP() << "no CUDA device";
    std::string error;
    context_ = cuda::Context::Create(0, &error);
    ASSERT_NE(context_, nullptr) << error;
  }
  void TearDown() override {
    for (void* p : buffers_) cudaFree(p);
  }

  float* ToDevice(const std::vector<float>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(host.size(), 1) * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    buffers_.push_back(p);
    return static_cast<float*>(p);
  }
  std::vector<float> ToHost(const float* device, size_t n) {
    std::vector<float> host(n);
    EXPECT_EQ(cudaStreamSynchronize(context_->stream()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

  static void ExpectNear(const std::vector<float>& got, const std::vector<float>& want,
                         const std::string& what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-4 + 1e-4 * std::abs(want[i])) << what << "[" << i << "]";
    }
  }

  std::unique_ptr<cuda::Context> context_;

 private:
  std::vector<void*> buffers_;
};

// Two layers and a ReLU on the last (a DLRM bottom MLP), then their backward with the input's
// gradient (a top MLP's): every output against the CPU's.
TEST_F(DenseLayersCudaTest, ForwardAndBackwardAgreeWithTheCpu) {
  DenseProblem p({13, 40, 7});
  const int rows = 70, widest = 40, act_width = 40 + 7;
  const std::vector<size_t> offsets = p.Offsets();
  const std::vector<float> x = RandomFloats(rows * p.dims[0], 1);
  std::vector<float> dz0 = RandomFloats(rows * p.dims.back(), 2);
  dz0.resize(rows * widest);  // the last layer's gradient first, the rest scratch

  // CPU.
  std::vector<float> acts(rows * act_width);
  DenseForward(x.data(), rows, p.dims, p.ParamPtrs().data(), /*relu_last=*/true, acts.data());
  std::vector<float> dz0_cpu = dz0, dz1_cpu(rows * widest);
  float* const dz[2] = {dz0_cpu.data(), dz1_cpu.data()};
  std::vector<float> din(rows * p.dims[0]);
  // Backward as if the last layer had no ReLU: its given gradient is the pre-activation's.
  DenseBackward(x.data(), rows, p.dims, p.ParamPtrs().data(), acts.data(), dz,
                p.GradPtrs().data(), din.data());

  // GPU.
  cuda::DenseParams d;
  d.params = ToDevice(p.Packed());
  float* grads_d = ToDevice(std::vector<float>(offsets.back()));
  d.grads = grads_d;
  d.offsets = offsets.data();
  float* x_d = ToDevice(x);
  float* acts_d = ToDevice(std::vector<float>(rows * act_width));
  float* const dz_d[2] = {ToDevice(dz0), ToDevice(std::vector<float>(rows * widest))};
  float* din_d = ToDevice(std::vector<float>(din.size()));
  ASSERT_EQ(cuda::DenseForward(*context_, d, x_d, rows, p.dims, /*relu_last=*/true, acts_d), "");
  ASSERT_EQ(cuda::DenseBackward(*context_, d, x_d, rows, p.dims, acts_d, dz_d, din_d), "");

  ExpectNear(ToHost(acts_d, acts.size()), acts, "activations");
  const std::vector<float> grads_got = ToHost(grads_d, offsets.back());
  for (size_t i = 0; i < p.grads.size(); ++i) {
    ExpectNear(std::vector<float>(grads_got.begin() + offsets[i],
                                  grads_got.begin() + offsets[i + 1]),
               p.grads[i], "gradient " + std::to_string(i));
  }
  ExpectNear(ToHost(din_d, din.size()), din, "input gradient");
}

}  // namespace
}  // namespace shardps
