// The dense layers of an MLP on one CUDA device, as the MLP model and the DLRM model's bottom
// and top MLPs run them: act = act(in * W + b) per layer with cuBLAS, and the backward pass.
// Every matrix is row-major, as the ps stores it. Plain C++ without CUDA headers (nvcc's host
// compilation and absl do not mix); errors are a message, "" for none.
//
// Thread safety: none; the caller serializes calls on one context.
#ifndef SHARDPS_MODEL_DENSE_LAYERS_CUDA_H_
#define SHARDPS_MODEL_DENSE_LAYERS_CUDA_H_

#include <cstddef>
#include <string>
#include <vector>

#include "compute/cuda_context.h"

namespace shardps {
namespace cuda {

// Where a stack of layers lies in device memory: layer l's kernel (dims[l] x dims[l+1]) at
// params + offsets[2l], its bias at params + offsets[2l+1]; their gradients at the same
// offsets of grads.
struct DenseParams {
  const float* params = nullptr;
  float* grads = nullptr;  // backward only
  const size_t* offsets = nullptr;
};

// act_l = act(act_{l-1} * W_l + b_l) for each layer l of dims ({input, widths...}), act_0 the
// batch x dims[0] input `in`, into consecutive batch x dims[l+1] blocks of acts; ReLU on
// every layer when relu_last, else on all but the last. Queued on the context's stream.
std::string DenseForward(const Context& context, const DenseParams& p, const float* in,
                         int batch, const std::vector<int>& dims, bool relu_last, float* acts);

// Backward of DenseForward (without a ReLU on the last layer: dz[0] holds the gradient of the
// last pre-activation, batch x dims.back()). dz[0] and dz[1] are scratch of batch x the
// widest layer. Writes every layer's kernel and bias gradient into p.grads, and, when din is
// set, the gradient of the input into din (batch x dims[0]).
std::string DenseBackward(const Context& context, const DenseParams& p, const float* in,
                          int batch, const std::vector<int>& dims, const float* acts,
                          float* const dz[2], float* din);

}  // namespace cuda
}  // namespace shardps

#endif  // SHARDPS_MODEL_DENSE_LAYERS_CUDA_H_
