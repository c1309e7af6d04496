// ComputeBackend: forward and backward passes of a model (see model.h) over one batch, on
// the CPU (Eigen) or a GPU (CUDA + cuBLAS), chosen at run time behind one interface. The GPU
// backend lives in a plugin, libshardps_cuda.so, loaded only when the GPU is asked for (kAuto,
// kGpu), so that binaries linking this run where no CUDA library is installed; where the
// plugin is looked for: cuda_plugin_loader.h.
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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "model/mlp.h"

namespace shardps {

enum class BackendKind {
  kAuto,  // The GPU when the CUDA plugin loads and its runtime sees one, else the CPU.
  kCpu,
  kGpu,
};

// "auto", "cpu" or "gpu"; INVALID_ARGUMENT otherwise.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text);

// What ComputeBackend::Create does with a kind.
struct BackendChoice {
  BackendKind kind = BackendKind::kCpu;  // kCpu or kGpu, never kAuto
  // kAuto made kCpu because the CUDA plugin could not be loaded: why, naming the path(s)
  // tried and the loader's error. Empty otherwise (also when the plugin loaded and saw no
  // device: a machine without a GPU).
  std::string fallback_reason;
};

// kCpu and kGpu as they are, without touching the CUDA plugin. kAuto: kGpu when the plugin
// loads and reports a device, else kCpu. `cuda_plugin_paths`: where to look for the plugin,
// in order (CudaPlugin::Load); empty: CudaPluginSearchPath(), the default.
BackendChoice ResolveBackendKind(BackendKind kind,
                                 const std::vector<std::string>& cuda_plugin_paths = {});

struct StepResult {
  float loss = 0;       // Mean softmax cross-entropy over the batch.
  int64_t correct = 0;  // Examples whose arg-max logit (first on ties) is the label.
};

struct EvalResult {
  double loss_sum = 0;  // Summed, not mean, so that batches add up exactly.
  int64_t correct = 0;
  int64_t num_examples = 0;
};

// The CUDA plugin hands its backends across as this class: a change to its virtual functions
// is a change of the plugin's ABI (kCudaPluginAbiVersion, cuda_plugin_abi.h).
class ComputeBackend {
 public:
  // kCpu: Eigen on num_threads threads (<= 0: one per hardware thread); never loads the
  // CUDA plugin. kGpu: the first CUDA device, through the plugin: FAILED_PRECONDITION naming
  // the path(s) tried and dlerror() when it cannot be loaded, FAILED_PRECONDITION "no CUDA
  // device" when there is none (no device, no driver, or the runtime fails). kAuto
  // (ResolveBackendKind): kGpu when a device exists, else kCpu; a plugin that cannot be
  // loaded is no error then, and its reason is written to stderr in one line. A device that
  // exists but fails to initialize is an error under kAuto too, not a reason to train on the
  // CPU unnoticed. `cuda_plugin_paths` as for ResolveBackendKind.
  static absl::StatusOr<std::unique_ptr<ComputeBackend>> Create(
      BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths = {});

  virtual ~ComputeBackend() = default;

  // "cpu (Eigen, 4 threads)" or "gpu (NVIDIA H100 80GB HBM3)".
  virtual std::string Name() const = 0;

  // One training step's compute: loss and correct count of the batch into *out, and the
  // gradients of the mean loss into grads (same shapes and order as params; overwritten).
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

}  // namespace shardps

#endif  // SHARDPS_WORKER_COMPUTE_BACKEND_H_
