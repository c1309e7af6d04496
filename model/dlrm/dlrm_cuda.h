// The CUDA + cuBLAS implementation of DlrmCompute, built into the CUDA plugin
// (libshardps_cuda.so, worker/compute/cuda_plugin.cc). This header includes no CUDA headers;
// the CUDA code lives in dlrm_cuda.cu. Prefer CreateDlrmCompute, which loads the plugin; a
// binary that links this directly links cudart and cuBLAS (tests and benchmarks only).
//
// Results agree with the CPU's within float rounding; the row gradients are summed with
// atomicAdd and so are not bit-reproducible from run to run (dlrm_cuda.cu).
#ifndef SHARDPS_MODEL_DLRM_DLRM_CUDA_H_
#define SHARDPS_MODEL_DLRM_DLRM_CUDA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/dlrm/dlrm_compute.h"

namespace shardps {

// CUDA devices visible to this process; 0 without a driver or device (never fails).
int DlrmCudaDeviceCount();

// A DlrmCompute on CUDA device `device`. FAILED_PRECONDITION "no CUDA device" when there is
// none; INVALID_ARGUMENT for a device index out of range; INTERNAL when CUDA or cuBLAS cannot
// be initialized. Inputs are copied to device buffers that are cached and grown across calls.
absl::StatusOr<std::unique_ptr<DlrmCompute>> NewDlrmCudaCompute(int device = 0);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_CUDA_H_
