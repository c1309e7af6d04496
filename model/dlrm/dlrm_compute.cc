#include "model/dlrm/dlrm_compute.h"

#include "common/status_macros.h"
#include "model/dlrm/dlrm_cpu.h"

namespace shardps {

absl::StatusOr<std::unique_ptr<DlrmCompute>> NewDlrmCompute(const ComputeDevice& device) {
  if (device.kind() == BackendKind::kCpu) return NewDlrmCpuCompute(device.num_threads());
  return device.plugin().NewCompute<DlrmCompute>(kDlrmCudaComputeKind, device.cuda_device());
}

absl::StatusOr<std::unique_ptr<DlrmCompute>> CreateDlrmCompute(
    BackendKind kind, int num_threads, const std::vector<std::string>& cuda_plugin_paths) {
  ASSIGN_OR_RETURN(ComputeDevice device,
                   ComputeDevice::Open(kind, num_threads, cuda_plugin_paths));
  return NewDlrmCompute(device);
}

}  // namespace shardps
