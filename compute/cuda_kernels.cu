// The CUDA side of cuda_kernels.h: plain C++ and CUDA, compiled by nvcc.
#include "compute/cuda_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>

namespace shardps {
namespace cuda {
namespace {

__global__ void BiasActivationKernel(float* z, const float* b, int rows, int cols, bool relu) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const float v = z[i] + b[i % cols];
    z[i] = relu ? fmaxf(v, 0.0f) : v;
  }
}

__global__ void ReluGradKernel(float* da, const float* a, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    if (!(a[i] > 0.0f)) da[i] = 0.0f;
  }
}

// Block (32, 8): 32 columns, each summed by 8 row-strided threads and then combined in a
// fixed order.
constexpr int kColTile = 32;
constexpr int kRowLanes = 8;
__global__ void ColumnSumsKernel(const float* m, int rows, int cols, float* out) {
  __shared__ float part[kRowLanes][kColTile + 1];
  const int col = blockIdx.x * kColTile + threadIdx.x;
  float s = 0.0f;
  if (col < cols) {
    for (int r = threadIdx.y; r < rows; r += kRowLanes) s += m[static_cast<int64_t>(r) * cols + col];
  }
  part[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float t = 0.0f;
    for (int k = 0; k < kRowLanes; ++k) t += part[k][threadIdx.x];
    out[col] = t;
  }
}

}  // namespace

int GridFor(int64_t n) {
  return static_cast<int>(
      std::max<int64_t>(1, std::min<int64_t>((n + kThreadsPerBlock - 1) / kThreadsPerBlock, 8192)));
}

void LaunchBiasActivation(float* z, const float* b, int rows, int cols, bool relu,
                          CUstream_st* stream) {
  BiasActivationKernel<<<GridFor(static_cast<int64_t>(rows) * cols), kThreadsPerBlock, 0,
                         stream>>>(z, b, rows, cols, relu);
}

void LaunchReluGrad(float* da, const float* a, int64_t n, CUstream_st* stream) {
  ReluGradKernel<<<GridFor(n), kThreadsPerBlock, 0, stream>>>(da, a, n);
}

void LaunchColumnSums(const float* m, int rows, int cols, float* out, CUstream_st* stream) {
  ColumnSumsKernel<<<(cols + kColTile - 1) / kColTile, dim3(kColTile, kRowLanes), 0, stream>>>(
      m, rows, cols, out);
}

}  // namespace cuda
}  // namespace shardps
