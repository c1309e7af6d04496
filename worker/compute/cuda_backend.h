// The CUDA + cuBLAS implementation of ComputeBackend. This header includes no CUDA headers,
// so any target may include it; the CUDA code lives in cuda_backend.cu. Prefer
// ComputeBackend::Create; these are for tests and benchmarks.
#ifndef SHARDPS_WORKER_COMPUTE_CUDA_BACKEND_H_
#define SHARDPS_WORKER_COMPUTE_CUDA_BACKEND_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/compute/backend.h"

namespace shardps {

// CUDA devices visible to this process; 0 when there is no driver or device or the runtime
// reports any error (never crashes for lack of a GPU).
int CudaDeviceCount();

// A backend on CUDA device `device`. FAILED_PRECONDITION "no CUDA device" when there is
// none; INVALID_ARGUMENT for a device index out of range; INTERNAL when CUDA or cuBLAS
// cannot be initialized. Parameters and data are copied to device buffers that are cached
// and grown across calls; results come back to the caller's host buffers.
absl::StatusOr<std::unique_ptr<ComputeBackend>> NewCudaBackend(int device = 0);

}  // namespace shardps

#endif  // SHARDPS_WORKER_COMPUTE_CUDA_BACKEND_H_
