// The shared CUDA kernels against the same loops on the host, bit for bit (each output is one
// float operation, or a sum in the kernel's documented order). Needs a GPU: skips, saying
// why, where no CUDA device is visible; tagged "gpu".
#include "compute/cuda_kernels.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace cuda {
namespace {

class CudaKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no CUDA device";
  }

  // A device copy of `host`, freed at TearDown.
  float* ToDevice(const std::vector<float>& host) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice),
              cudaSuccess);
    buffers_.push_back(p);
    return static_cast<float*>(p);
  }
  static std::vector<float> ToHost(const float* device, size_t n) {
    std::vector<float> host(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(float), cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }
  void TearDown() override {
    for (void* p : buffers_) cudaFree(p);
  }

  static std::vector<float> Random(size_t n, uint32_t seed) {
    std::mt19937 gen(seed);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    std::vector<float> v(n);
    for (float& x : v) x = uniform(gen);
    return v;
  }

 private:
  std::vector<void*> buffers_;
};

TEST_F(CudaKernelsTest, BiasActivationAddsTheBiasAndAppliesTheReluWhenAsked) {
  const int rows = 300, cols = 37;  // more elements than one block
  const std::vector<float> z = Random(rows * cols, 1), b = Random(cols, 2);
  for (bool relu : {false, true}) {
    float* z_d = ToDevice(z);
    LaunchBiasActivation(z_d, ToDevice(b), rows, cols, relu, nullptr);
    const std::vector<float> got = ToHost(z_d, z.size());
    for (int i = 0; i < rows * cols; ++i) {
      const float v = z[i] + b[i % cols];
      ASSERT_EQ(got[i], relu && v < 0.0f ? 0.0f : v) << "relu " << relu << " at " << i;
    }
  }
}

TEST_F(CudaKernelsTest, ReluGradZeroesWhereTheOutputWasNotPositive) {
  const int64_t n = 5000;
  std::vector<float> a = Random(n, 3);
  a[0] = 0.0f;  // not positive: its gradient goes
  const std::vector<float> da = Random(n, 4);
  float* da_d = ToDevice(da);
  LaunchReluGrad(da_d, ToDevice(a), n, nullptr);
  const std::vector<float> got = ToHost(da_d, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], a[i] > 0.0f ? da[i] : 0.0f) << i;
}

TEST_F(CudaKernelsTest, ColumnSumsAddEightRowStridedPartialsInOrder) {
  const int rows = 101, cols = 70;  // more columns than one block's 32
  const std::vector<float> m = Random(rows * cols, 5);
  float* out_d = ToDevice(std::vector<float>(cols, -1.0f));
  LaunchColumnSums(ToDevice(m), rows, cols, out_d, nullptr);
  const std::vector<float> got = ToHost(out_d, cols);
  for (int c = 0; c < cols; ++c) {
    float total = 0.0f;
    for (int lane = 0; lane < 8; ++lane) {
      float part = 0.0f;
      for (int r = lane; r < rows; r += 8) part += m[r * cols + c];
      total += part;
    }
    ASSERT_EQ(got[c], total) << "column " << c;
  }
}

TEST(CudaKernelsGridTest, GridForCoversEveryElementWithinItsBounds) {
  EXPECT_EQ(GridFor(0), 1);
  EXPECT_EQ(GridFor(1), 1);
  EXPECT_EQ(GridFor(kThreadsPerBlock), 1);
  EXPECT_EQ(GridFor(kThreadsPerBlock + 1), 2);
  EXPECT_EQ(GridFor(int64_t{1} << 40), 8192);
}

}  // namespace
}  // namespace cuda
}  // namespace shardps
