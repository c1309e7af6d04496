// Where a compute runs, as a job or a daemon's --backend asks for it: auto, cpu or gpu; and
// what auto comes to on this machine (the GPU when the CUDA plugin loads and sees a device).
//
// Thread safety: free functions; safe to call concurrently.
#ifndef SHARDPS_COMPUTE_BACKEND_KIND_H_
#define SHARDPS_COMPUTE_BACKEND_KIND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

enum class BackendKind {
  kAuto,  // The GPU when the CUDA plugin loads and its runtime sees one, else the CPU.
  kCpu,
  kGpu,
};

// "auto", "cpu" or "gpu"; INVALID_ARGUMENT otherwise.
absl::StatusOr<BackendKind> ParseBackendKind(absl::string_view text);

// What a kind comes to.
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

}  // namespace shardps

#endif  // SHARDPS_COMPUTE_BACKEND_KIND_H_
