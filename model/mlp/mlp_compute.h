// MlpCompute: forward and backward passes of the MLP (mlp_spec.h) over one batch, on the CPU
// (Eigen, mlp_cpu.h) or a GPU (CUDA + cuBLAS, mlp_cuda.h, inside the CUDA plugin
// libshardps_cuda.so, loaded only when a GPU is asked for).
//
// Buffers are plain host memory: parameters and gradients are row-major float arrays in
// Params(spec) order (kernel [in, out], then bias [out], per layer), features are
// batch x input_dim row-major, labels are batch int32s. The caller owns them all; a
// compute neither keeps nor frees them.
//
// Thread safety: a compute may be shared by many threads; its calls run one at a time.
#ifndef SHARDPS_MODEL_MLP_MLP_COMPUTE_H_
#define SHARDPS_MODEL_MLP_MLP_COMPUTE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/backend_kind.h"
#include "compute/compute_device.h"
#include "model/mlp/mlp_spec.h"
#include "model/step_result.h"

namespace shardps {

// The CUDA plugin's name for the MLP's compute (shardps_cuda_new_compute): it makes an
// MlpCompute, so a change to this class's virtual functions is a change of the plugin's ABI
// (kCudaPluginAbiVersion, compute/cuda_plugin_abi.h).
inline constexpr char kMlpCudaComputeKind[] = "mlp";

class MlpCompute {
 public:
  virtual ~MlpCompute() = default;

  // "cpu (Eigen, 4 threads)" or "gpu (NVIDIA H100 80GB HBM3)".
  virtual std::string Name() const = 0;

  // One training step's compute: mean softmax cross-entropy of the batch and the examples
  // whose arg-max logit (first on ties) is the label into *out, and the gradients of the
  // mean loss into grads (same shapes and order as params; overwritten).
  // INVALID_ARGUMENT for a bad spec, wrong number of params or grads, null buffers,
  // batch <= 0, or a label outside [0, num_classes) (naming the label and its index).
  // On CPU the result is bit-for-bit reproducible for a fixed thread count.
  virtual absl::Status ForwardBackward(const MlpSpec& spec,
                                       absl::Span<const float* const> params,
                                       const float* features, const int32_t* labels, int batch,
                                       StepResult* out, absl::Span<float* const> grads) = 0;

  // Forward only: summed loss and correct count of the batch. Same errors.
  virtual absl::Status Evaluate(const MlpSpec& spec, absl::Span<const float* const> params,
                                const float* features, const int32_t* labels, int batch,
                                EvalResult* out) = 0;
};

// An MLP compute on `device`: Eigen on its threads, or its CUDA device through the plugin
// (NewMlpCudaCompute's errors, e.g. INTERNAL when the device fails to initialize).
absl::StatusOr<std::unique_ptr<MlpCompute>> NewMlpCompute(const ComputeDevice& device);

// ComputeDevice::Open(kind, num_threads, cuda_plugin_paths), then NewMlpCompute: a plugin that
// cannot be loaded under kAuto is written to stderr and the CPU used; under kGpu it is an
// error, as is a GPU that fails to initialize under either.
absl::StatusOr<std::unique_ptr<MlpCompute>> CreateMlpCompute(
    BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths = {});

}  // namespace shardps

#endif  // SHARDPS_MODEL_MLP_MLP_COMPUTE_H_
