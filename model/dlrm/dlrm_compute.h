// DlrmCompute: forward and backward passes of the DLRM model (dlrm_spec.h) over one batch
// (dlrm_batch.h), on the CPU (Eigen, dlrm_cpu.h) or a GPU (CUDA + cuBLAS, dlrm_cuda.h, in the
// CUDA plugin libshardps_cuda.so), as the ComputeDevice says (compute/compute_device.h).
//
// Dense parameters are host float arrays in DlrmDenseParams(spec) order, row-major (kernel
// {in, out}, bias {out}). Outputs are vectors that a call resizes and overwrites, so a caller
// that keeps one output object allocates nothing in steady state.
//
// Thread safety: an implementation may be shared by many threads; its calls run one at a time.
#ifndef SHARDPS_MODEL_DLRM_DLRM_COMPUTE_H_
#define SHARDPS_MODEL_DLRM_DLRM_COMPUTE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/backend_kind.h"
#include "compute/compute_device.h"
#include "model/dlrm/dlrm_batch.h"
#include "model/dlrm/dlrm_spec.h"

namespace shardps {

// The CUDA plugin's name for the DLRM compute (shardps_cuda_new_compute): it makes a
// DlrmCompute, so a change to this class's virtual functions or to the structs below is a
// change of the plugin's ABI (kCudaPluginAbiVersion, compute/cuda_plugin_abi.h).
inline constexpr char kDlrmCudaComputeKind[] = "dlrm";

struct DlrmStepOutput {
  // Mean binary log loss over the batch, computed from the logits (stable for any logit).
  double loss = 0;
  // Per example, B; sigmoid(logit) is the predicted click probability (for AUC).
  std::vector<float> logits;
  // Gradients of the mean loss: one per DlrmDenseParams(spec) entry, of its num_elements().
  std::vector<std::vector<float>> dense_grads;
  // Per table, num_rows x dim: row r's gradient, summed over every occurrence of r in the
  // batch (divided by the example's id count under mean pooling). Push with the table's
  // unique ids, in the same order.
  std::vector<std::vector<float>> row_grads;
};

struct DlrmEvalOutput {
  double loss_sum = 0;               // summed over the batch, so that batches add up
  int64_t num_examples = 0;
  std::vector<float> probabilities;  // B, sigmoid of the logits
};

class DlrmCompute {
 public:
  virtual ~DlrmCompute() = default;

  // "cpu (Eigen, 4 threads)" or "gpu (NVIDIA H100 80GB HBM3)".
  virtual std::string Name() const = 0;

  // One training step's compute. INVALID_ARGUMENT (naming the table or parameter, and the
  // sizes) for an invalid spec (ValidateDlrmSpec), dense params (CheckDlrmDenseParams) or batch
  // (ValidateDlrmBatch); nothing is written to *out then. On the CPU the result is
  // bit-for-bit reproducible for a fixed thread count.
  virtual absl::Status ForwardBackward(const DlrmSpec& spec,
                                       absl::Span<const absl::Span<const float>> dense_params,
                                       const DlrmBatch& batch, DlrmStepOutput* out) = 0;

  // Forward only. Same errors.
  virtual absl::Status Evaluate(const DlrmSpec& spec,
                                absl::Span<const absl::Span<const float>> dense_params,
                                const DlrmBatch& batch, DlrmEvalOutput* out) = 0;
};

// A DLRM compute on `device`: Eigen on its threads, or its CUDA device through the plugin
// (NewDlrmCudaCompute's errors, e.g. INTERNAL when the device fails to initialize).
absl::StatusOr<std::unique_ptr<DlrmCompute>> NewDlrmCompute(const ComputeDevice& device);

// ComputeDevice::Open(kind, num_threads, cuda_plugin_paths), then NewDlrmCompute: kCpu never
// loads the CUDA plugin; kGpu: FAILED_PRECONDITION when the plugin cannot be loaded or sees no
// device; kAuto: the GPU when the plugin loads and sees a device, else the CPU (a plugin that
// cannot be loaded is then written to stderr in one line, not an error).
absl::StatusOr<std::unique_ptr<DlrmCompute>> CreateDlrmCompute(
    BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths = {});

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_COMPUTE_H_
