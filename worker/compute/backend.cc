#include "worker/compute/backend.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "worker/compute/cpu_backend.h"
#include "worker/compute/cuda_plugin_loader.h"

namespace shardps {
namespace {

absl::StatusOr<CudaPlugin> LoadPlugin(const std::vector<std::string>& paths) {
  return CudaPlugin::Load(paths.empty() ? CudaPluginSearchPath() : paths);
}

}  // namespace

absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text) {
  if (text == "auto") return BackendKind::kAuto;
  if (text == "cpu") return BackendKind::kCpu;
  if (text == "gpu") return BackendKind::kGpu;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend \"", text, "\": expected auto, cpu or gpu"));
}

BackendChoice ResolveBackendKind(BackendKind kind,
                                 const std::vector<std::string>& cuda_plugin_paths) {
  BackendChoice choice;
  if (kind != BackendKind::kAuto) {
    choice.kind = kind;
    return choice;
  }
  absl::StatusOr<CudaPlugin> plugin = LoadPlugin(cuda_plugin_paths);
  if (!plugin.ok()) {
    choice.kind = BackendKind::kCpu;
    choice.fallback_reason = std::string(plugin.status().message());
    return choice;
  }
  choice.kind = plugin->DeviceCount() > 0 ? BackendKind::kGpu : BackendKind::kCpu;
  return choice;
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> ComputeBackend::Create(
    BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths) {
  if (kind == BackendKind::kAuto) {
    const BackendChoice choice = ResolveBackendKind(kind, cuda_plugin_paths);
    if (!choice.fallback_reason.empty()) {
      std::cerr << "compute backend auto: using the CPU, the GPU backend is not available: "
                << choice.fallback_reason << "\n";
    }
    // A device that exists but fails to initialize is an error, not a reason to train
    // silently on the CPU.
    kind = choice.kind;
  }
  switch (kind) {
    case BackendKind::kCpu:
      return NewCpuBackend(num_threads);
    case BackendKind::kGpu: {
      absl::StatusOr<CudaPlugin> plugin = LoadPlugin(cuda_plugin_paths);
      if (!plugin.ok()) return plugin.status();
      return plugin->NewBackend(0);
    }
    case BackendKind::kAuto:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown BackendKind ", static_cast<int>(kind)));
}

}  // namespace shardps
