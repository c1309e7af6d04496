#include "compute/backend_kind.h"

#include "absl/strings/str_cat.h"
#include "compute/cuda_plugin_loader.h"

namespace shardps {

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
  absl::StatusOr<CudaPlugin> plugin =
      CudaPlugin::Load(cuda_plugin_paths.empty() ? CudaPluginSearchPath() : cuda_plugin_paths);
  if (!plugin.ok()) {
    choice.kind = BackendKind::kCpu;
    choice.fallback_reason = std::string(plugin.status().message());
    return choice;
  }
  choice.kind = plugin->DeviceCount() > 0 ? BackendKind::kGpu : BackendKind::kCpu;
  return choice;
}

}  // namespace shardps
