// The CUDA + cuBLAS implementation of DlrmCompute, built into the CUDA plugin
// (libshardps_cuda.so, model/cuda_plugin). This header includes no CUDA headers; the CUDA code
// lives in dlrm_cuda.cu. Prefer NewDlrmCompute, which loads the plugin; a binary that links
// this directly links cudart and cuBLAS (tests and benchmarks only).
//
// Results agree with the CPU's within float rounding; the row gradients are summed with
// atomicAdd and so are not bit-reproducible from run to run (dlrm_cuda.cu).
#ifndef SHARDPS_MODEL_DLRM_DLRM_CUDA_H_
#define SHARDPS_MODEL_DLRM_DLRM_CUDA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/dlrm/dlrm_compute.h"

namespace shardps {

// A DlrmCompute on CUDA device `device`: OpenCudaContext's errors (compute/cuda_device.h):
// FAILED_PRECONDITION "no CUDA device", INVALID_ARGUMENT for a device index out of range,
// INTERNAL when CUDA or cuBLAS cannot be initialized. Inputs are copied to device buffers that
// are cached and grown across calls.
absl::StatusOr<std::unique_ptr<DlrmCompute>> NewDlrmCudaCompute(int device = 0);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_CUDA_H_
