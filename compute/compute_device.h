// ComputeDevice: the place a model's compute runs, chosen once: the CPU with a number of
// threads, or CUDA device 0 through the loaded CUDA plugin (cuda_plugin_loader.h). A model
// makes its compute for a device (Model::NewCompute); the device knows no model.
//
// Thread safety: immutable after Open; copies share nothing but the loaded plugin.
#ifndef SHARDPS_COMPUTE_COMPUTE_DEVICE_H_
#define SHARDPS_COMPUTE_COMPUTE_DEVICE_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/backend_kind.h"
#include "compute/cuda_plugin_loader.h"

namespace shardps {

class ComputeDevice {
 public:
  // The CPU with num_threads threads (<= 0: one per hardware thread); never loads the plugin.
  static ComputeDevice Cpu(int num_threads);

  // kCpu: Cpu(num_threads). kGpu: the first CUDA device, through the plugin, opened once to
  // check it: FAILED_PRECONDITION naming the path(s) tried and dlerror() when the plugin cannot
  // be loaded, FAILED_PRECONDITION "no CUDA device" when there is none (no device, no driver,
  // or the runtime fails), INTERNAL when it fails to initialize. kAuto (ResolveBackendKind):
  // kGpu when a device exists, else kCpu; a plugin that cannot be loaded is no error then,
  // and its reason is written to stderr in one line. A device that exists but fails to
  // initialize is an error under kAuto too, not a reason to compute on the CPU unnoticed.
  // `cuda_plugin_paths`: where to look for the plugin; empty: CudaPluginSearchPath().
  static absl::StatusOr<ComputeDevice> Open(
      BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths = {});

  BackendKind kind() const { return plugin_.has_value() ? BackendKind::kGpu : BackendKind::kCpu; }
  // The CPU's threads, >= 1 (also on a GPU device: what a compute's host side may use).
  int num_threads() const { return num_threads_; }
  // The CUDA device's index and the loaded plugin. REQUIRES: kind() == kGpu.
  int cuda_device() const { return 0; }
  const CudaPlugin& plugin() const { return *plugin_; }

  // "cpu (Eigen, 4 threads)" or "gpu (NVIDIA H100 80GB HBM3)": what every model's compute on
  // this device calls itself.
  const std::string& Name() const { return name_; }

 private:
  ComputeDevice(int num_threads, std::optional<CudaPlugin> plugin, std::string name)
      : num_threads_(num_threads), plugin_(std::move(plugin)), name_(std::move(name)) {}

  int num_threads_;
  std::optional<CudaPlugin> plugin_;
  std::string name_;
};

// The name of a CPU compute on num_threads threads: "cpu (Eigen, 1 thread)",
// "cpu (Eigen, 4 threads)".
std::string CpuComputeName(int num_threads);

// num_threads, or one per hardware thread when it is <= 0.
int ResolveThreadCount(int num_threads);

}  // namespace shardps

#endif  // SHARDPS_COMPUTE_COMPUTE_DEVICE_H_
