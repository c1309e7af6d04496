#include "worker/compute/backend.h"

#include "absl/strings/str_cat.h"
#include "worker/compute/cpu_backend.h"
#include "worker/compute/cuda_backend.h"

namespace shardps {

absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text) {
  if (text == "auto") return BackendKind::kAuto;
  if (text == "cpu") return BackendKind::kCpu;
  if (text == "gpu") return BackendKind::kGpu;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend \"", text, "\": expected auto, cpu or gpu"));
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> ComputeBackend::Create(BackendKind kind,
                                                                       int num_threads) {
  switch (kind) {
    case BackendKind::kCpu:
      return NewCpuBackend(num_threads);
    case BackendKind::kGpu:
      return NewCudaBackend();
    case BackendKind::kAuto:
      // A device that exists but fails to initialize is an error, not a reason to train
      // silently on the CPU.
      if (CudaDeviceCount() > 0) return NewCudaBackend();
      return NewCpuBackend(num_threads);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown BackendKind ", static_cast<int>(kind)));
}

}  // namespace shardps
