#include "compute/compute_device.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace shardps {

std::string CpuComputeName(int num_threads) {
  return absl::StrCat("cpu (Eigen, ", num_threads, num_threads == 1 ? " thread)" : " threads)");
}

int ResolveThreadCount(int num_threads) {
  if (num_threads > 0) return num_threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ComputeDevice ComputeDevice::Cpu(int num_threads) {
  num_threads = ResolveThreadCount(num_threads);
  return ComputeDevice(num_threads, std::nullopt, CpuComputeName(num_threads));
}

absl::StatusOr<ComputeDevice> ComputeDevice::Open(
    BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths) {
  if (kind == BackendKind::kAuto) {
    const BackendChoice choice = ResolveBackendKind(kind, cuda_plugin_paths);
    if (!choice.fallback_reason.empty()) {
      LogWarning() << "compute backend auto: using the CPU, the GPU backend is not available: "
                   << choice.fallback_reason;
    }
    kind = choice.kind;
  }
  switch (kind) {
    case BackendKind::kCpu:
      return Cpu(num_threads);
    case BackendKind::kGpu: {
      absl::StatusOr<CudaPlugin> plugin = CudaPlugin::Load(
          cuda_plugin_paths.empty() ? CudaPluginSearchPath() : cuda_plugin_paths);
      if (!plugin.ok()) return plugin.status();
      absl::StatusOr<std::string> name = plugin->OpenDevice(0);
      if (!name.ok()) return name.status();
      return ComputeDevice(ResolveThreadCount(num_threads), *std::move(plugin),
                           absl::StrCat("gpu (", *name, ")"));
    }
    case BackendKind::kAuto:
      break;
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown BackendKind ", static_cast<int>(kind)));
}

}  // namespace shardps
