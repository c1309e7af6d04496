// The boundary between cuda_backend.cc (absl, ComputeBackend) and cuda_backend.cu (CUDA,
// compiled by nvcc with its own host compiler): plain C++ only, no absl and no CUDA types.
#ifndef SHARDPS_WORKER_COMPUTE_CUDA_BACKEND_INTERNAL_H_
#define SHARDPS_WORKER_COMPUTE_CUDA_BACKEND_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace shardps {
namespace cuda_internal {

// See CudaDeviceCount().
int DeviceCount();

// MLP forward and backward on one device, with its stream, cuBLAS handle and device
// buffers. Not thread-safe: the caller serializes calls.
class MlpRunner {
 public:
  // nullptr, with *error set, when the device cannot be initialized.
  static std::unique_ptr<MlpRunner> Create(int device, std::string* error);
  ~MlpRunner();

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
  explicit MlpRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace cuda_internal
}  // namespace shardps

#endif  // SHARDPS_WORKER_COMPUTE_CUDA_BACKEND_INTERNAL_H_
