// The CUDA side of dense_layers_cuda.h: plain C++ and CUDA, compiled by nvcc.
//
// cuBLAS is column-major, and a row-major R x C matrix is the column-major C x R matrix of its
// transpose, so each product C = A * B is computed as C^T = B^T * A^T with the operands
// swapped.
#include "model/dense_layers_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "compute/cuda_check.h"
#include "compute/cuda_kernels.h"

namespace shardps {
namespace cuda {

std::string DenseForward(const Context& context, const DenseParams& p, const float* in,
                         int batch, const std::vector<int>& dims, bool relu_last, float* acts) {
  const float one = 1.0f, zero = 0.0f;
  const int layers = static_cast<int>(dims.size()) - 1;
  for (int l = 0; l < layers; ++l) {
    const int k = dims[l], out = dims[l + 1];
    const float* w = p.params + p.offsets[2 * l];
    const float* b = p.params + p.offsets[2 * l + 1];
    // act = in * W ([batch, out]): act^T = W^T * in^T column-major.
    CUBLAS_RETURN_IF_ERROR("sgemm (forward)",
                           cublasSgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, out, batch,
                                       k, &one, w, out, in, k, &zero, acts, out));
    LaunchBiasActivation(acts, b, batch, out, relu_last || l + 1 < layers, context.stream());
    in = acts;
    acts += static_cast<int64_t>(batch) * out;
  }
  return "";
}

std::string DenseBackward(const Context& context, const DenseParams& p, const float* in,
                          int batch, const std::vector<int>& dims, const float* acts,
                          float* const dz[2], float* din) {
  const float one = 1.0f, zero = 0.0f;
  const int layers = static_cast<int>(dims.size()) - 1;
  std::vector<const float*> act(layers);
  for (int l = 0; l < layers; ++l) {
    act[l] = acts;
    acts += static_cast<int64_t>(batch) * dims[l + 1];
  }
  int cur = 0;
  for (int l = layers - 1; l >= 0; --l) {
    const int k = dims[l], out = dims[l + 1];
    const float* a = l == 0 ? in : act[l - 1];
    const float* w = p.params + p.offsets[2 * l];
    // dW = A^T dZ ([k, out]): dW^T = dZ^T A column-major.
    CUBLAS_RETURN_IF_ERROR("sgemm (weight gradient)",
                           cublasSgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, out, k,
                                       batch, &one, dz[cur], out, a, k, &zero,
                                       p.grads + p.offsets[2 * l], out));
    LaunchColumnSums(dz[cur], batch, out, p.grads + p.offsets[2 * l + 1], context.stream());
    float* da = l == 0 ? din : dz[1 - cur];
    if (da == nullptr) break;
    // dA = dZ W^T ([batch, k]): dA^T = W dZ^T column-major.
    CUBLAS_RETURN_IF_ERROR("sgemm (input gradient)",
                           cublasSgemm(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, k, batch,
                                       out, &one, w, out, dz[cur], out, &zero, da, k));
    if (l == 0) break;
    LaunchReluGrad(da, act[l - 1], int64_t{batch} * k, context.stream());
    cur = 1 - cur;
  }
  return "";
}

}  // namespace cuda
}  // namespace shardps
