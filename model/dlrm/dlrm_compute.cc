#include "model/dlrm/dlrm_compute.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "model/dlrm/dlrm_cpu.h"
#include "worker/compute/cuda_plugin_loader.h"

namespace shardps {

absl::StatusOr<std::unique_ptr<DlrmCompute>> CreateDlrmCompute(
    BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths) {
  if (kind == BackendKind::kAuto) {
    const BackendChoice choice = ResolveBackendKind(kind, cuda_plugin_paths);
    if (!choice.fallback_reason.empty()) {
      std::cerr << "dlrm compute auto: using the CPU, the GPU is not available: "
                << choice.fallback_reason << "\n";
    }
    // A device that exists but fails to initialize is an error, not a reason to train
    // silently on the CPU.
    kind = choice.kind;
  }
  switch (kind) {
    case BackendKind::kCpu:
      return NewDlrmCpuCompute(num_threads);
    case BackendKind::kGpu: {
      absl::StatusOr<CudaPlugin> plugin =
          CudaPlugin::Load(cuda_plugin_paths.empty() ? CudaPluginSearchPath() : cuda_plugin_paths);
      if (!plugin.ok()) return plugin.status();
      return plugin->NewDlrmCompute(0);
    }
    case BackendKind::kAuto:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown BackendKind ", static_cast<int>(kind)));
}

}  // namespace shardps
