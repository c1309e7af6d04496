// ComputeBackend: forward and backward passes of a model (see model.h) over one batch, on
// the CPU (Eigen) or a GPU (CUDA + cuBLAS), chosen at run time behind one interface.
//
// Buffers are plain host memory: parameters and gradients are row-major float arrays in
// Params(spec) order (kernel [in, out], then bias [out], per layer), features are
// batch x input_dim row-major, labels are batch int32s. The caller owns them all; a
// backend neither keeps nor frees them.
//
// Thread safety: a backend may be shared by many threads; its calls run one at a time.
#ifndef SHARDPS_WORKER_COMPUTE_BACKEND_H_
#define SHARDPS_WORKER_COMPUTE_BACKEND_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/compute/model.h"

namespace shardps {

enum class BackendKind {
  kAuto,  // The GPU when the CUDA runtime sees one, else the CPU.
  kCpu,
  kGpu,
};

// "auto", "cpu" or "gpu"; INVALID_ARGUMENT otherwise.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text);

struct StepResult {
  float loss = 0;       // Mean softmax cross-entropy over the batch.
  int64_t correct = 0;  // Examples whose arg-max logit (first on ties) is the label.
};

struct EvalResult {
  double loss_sum = 0;  // Summed, not mean, so that batches add up exactly.
  int64_t correct = 0;
  int64_t num_examples = 0;
};

class ComputeBackend {
 public:
  // kCpu: Eigen on num_threads threads (<= 0: one per hardware thread). kGpu: the first
  // CUDA device; FAILED_PRECONDITION "no CUDA device" when there is none (no device, no
  // driver, or the runtime fails). kAuto: kGpu when a device exists, else kCpu.
  static absl::StatusOr<std::unique_ptr<ComputeBackend>> Create(BackendKind kind,
                                                                int num_threads);

  virtual ~ComputeBackend() = default;

  // "cpu (Eigen, 4 threads)" or "gpu (NVIDIA H100 80GB HBM3)".
  virtual std::string Name() const = 0;

  // One training step's compute: loss and correct count of the batch into *out, and the
  // gradients of the mean loss into grads (same shapes and order as params; overwritten).
  // INVALID_ARGUMENT for a bad spec, wrong number of params or grads, null buffers,
  // batch <= 0, or a label outside [0, num_classes) (naming the label and its index).
  // On CPU the result is bit-for-bit reproducible for a fixed thread count.
  virtual absl::Status ForwardBackward(const ModelSpec& spec,
                                       absl::Span<const float* const> params,
                                       const float* features, const int32_t* labels, int batch,
                                       StepResult* out, absl::Span<float* const> grads) = 0;

  // Forward only: summed loss and correct count of the batch. Same errors.
  virtual absl::Status Evaluate(const ModelSpec& spec, absl::Span<const float* const> params,
                                const float* features, const int32_t* labels, int batch,
                                EvalResult* out) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_WORKER_COMPUTE_BACKEND_H_
