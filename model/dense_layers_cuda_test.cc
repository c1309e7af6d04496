// The CUDA dense layers against the CPU ones (float rounding apart: cuBLAS sums in its own
// order). Needs a GPU: skips, saying why, where no CUDA device is visible; tagged "gpu".
#include "model/dense_layers_cuda.h"

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/dense_layers_cpu.h"

namespace shardps {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(gen);
  return v;
}

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
  const std::vector<int> dims = {13, 40, 7};
  const int rows = 70, widest = 40, act_width = 40 + 7;
  // The packed parameters: W0, b0, W1, b1.
  std::vector<size_t> offsets = {0};
  std::vector<float> packed;
  std::vector<std::vector<float>> params;
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    for (size_t n : {static_cast<size_t>(dims[l]) * dims[l + 1], static_cast<size_t>(dims[l + 1])}) {
      params.push_back(Random(n, 10 + params.size()));
      packed.insert(packed.end(), params.back().begin(), params.back().end());
      offsets.push_back(packed.size());
    }
  }
  std::vector<const float*> param_ptrs;
  for (const std::vector<float>& p : params) param_ptrs.push_back(p.data());
  const std::vector<float> x = Random(rows * dims[0], 1);
  const std::vector<float> dlast = Random(rows * dims.back(), 2);

  // CPU.
  std::vector<float> acts(rows * act_width);
  DenseForward(x.data(), rows, dims, param_ptrs.data(), /*relu_last=*/true, acts.data());
  std::vector<float> dz0 = dlast, dz1(rows * widest);
  dz0.resize(rows * widest);
  float* const dz[2] = {dz0.data(), dz1.data()};
  std::vector<std::vector<float>> grads;
  std::vector<float*> grad_ptrs;
  for (const std::vector<float>& p : params) grads.emplace_back(p.size());
  for (std::vector<float>& g : grads) grad_ptrs.push_back(g.data());
  std::vector<float> din(rows * dims[0]);
  // Backward as if the last layer had no ReLU: its given gradient is the pre-activation's.
  DenseBackward(x.data(), rows, dims, param_ptrs.data(), acts.data(), dz, grad_ptrs.data(),
                din.data());

  // GPU.
  cuda::DenseParams p;
  p.params = ToDevice(packed);
  float* grads_d = ToDevice(std::vector<float>(packed.size()));
  p.grads = grads_d;
  p.offsets = offsets.data();
  float* x_d = ToDevice(x);
  float* acts_d = ToDevice(std::vector<float>(rows * act_width));
  std::vector<float> dz0_d_host = dlast;
  dz0_d_host.resize(rows * widest);
  float* const dz_d[2] = {ToDevice(dz0_d_host), ToDevice(std::vector<float>(rows * widest))};
  float* din_d = ToDevice(std::vector<float>(rows * dims[0]));
  ASSERT_EQ(cuda::DenseForward(*context_, p, x_d, rows, dims, /*relu_last=*/true, acts_d), "");
  ASSERT_EQ(cuda::DenseBackward(*context_, p, x_d, rows, dims, acts_d, dz_d, din_d), "");

  ExpectNear(ToHost(acts_d, acts.size()), acts, "activations");
  const std::vector<float> grads_got = ToHost(grads_d, packed.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    ExpectNear(std::vector<float>(grads_got.begin() + offsets[i],
                                  grads_got.begin() + offsets[i + 1]),
               grads[i], "gradient " + std::to_string(i));
  }
  ExpectNear(ToHost(din_d, din.size()), din, "input gradient");
}

}  // namespace
}  // namespace shardps
