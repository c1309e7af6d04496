// The CUDA device context of cuda_context.h, opened with absl errors: what every model's CUDA
// compute and the CUDA plugin do before any kernel runs. Linked only into the CUDA plugin and
// GPU tests (it links cudart and cuBLAS).
//
// Thread safety: free functions; safe to call concurrently.
#ifndef SHARDPS_COMPUTE_CUDA_DEVICE_H_
#define SHARDPS_COMPUTE_CUDA_DEVICE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "compute/cuda_context.h"

namespace shardps {

// CUDA devices visible to this process; 0 without a driver or device (never fails).
int CudaDeviceCount();

// A context on CUDA device `device`. FAILED_PRECONDITION "no CUDA device" when there is none;
// INVALID_ARGUMENT "CUDA device <d> does not exist: <n> device(s) visible"; INTERNAL
// "CUDA device <d>: <CUDA's or cuBLAS's error>" when it cannot be initialized.
absl::StatusOr<std::unique_ptr<cuda::Context>> OpenCudaContext(int device);

}  // namespace shardps

#endif  // SHARDPS_COMPUTE_CUDA_DEVICE_H_
