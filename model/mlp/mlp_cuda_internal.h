// The boundary between mlp_cuda.cc (absl, MlpCompute) and mlp_cuda.cu (CUDA, compiled by nvcc
// with its own host compiler): plain C++ only, no absl and no CUDA types.
#ifndef SHARDPS_MODEL_MLP_MLP_CUDA_INTERNAL_H_
#define SHARDPS_MODEL_MLP_MLP_CUDA_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute/cuda_context.h"

namespace shardps {
namespace mlp_cuda {

// MLP forward and backward on one device's context, with device buffers (grown, never
// shrunk). Not thread-safe: the caller serializes calls.
class Runner {
 public:
  explicit Runner(std::unique_ptr<cuda::Context> context);
  ~Runner();

  const std::string& device_name() const;

  // dims: {input_dim, hidden..., num_classes}. params: 2 * (dims.size() - 1) host buffers
  // (kernel, bias per layer, row-major); grads: the same, filled with the gradients of the
  // mean loss, or nullptr for a forward pass only. Adds the batch's summed loss and correct
  // count to *loss_sum and *correct. Returns "" or an error message. Arguments are checked
  // by the caller.
  std::string Run(const std::vector<int>& dims, const float* const* params,
                  const float* features, const int32_t* labels, int batch, float* const* grads,
                  double* loss_sum, int64_t* correct);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mlp_cuda
}  // namespace shardps

#endif  // SHARDPS_MODEL_MLP_MLP_CUDA_INTERNAL_H_
