#include "model/mlp/mlp_compute.h"

#include "common/status_macros.h"
#include "model/mlp/mlp_cpu.h"

namespace shardps {

absl::StatusOr<std::unique_ptr<MlpCompute>> NewMlpCompute(const ComputeDevice& device) {
  if (device.kind() == BackendKind::kCpu) return NewMlpCpuCompute(device.num_threads());
  return device.plugin().NewCompute<MlpCompute>(kMlpCudaComputeKind, device.cuda_device());
}

absl::StatusOr<std::unique_ptr<MlpCompute>> CreateMlpCompute(
    BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths) {
  ASSIGN_OR_RETURN(ComputeDevice device,
                   ComputeDevice::Open(kind, num_threads, cuda_plugin_paths));
  return NewMlpCompute(device);
}

}  // namespace shardps
