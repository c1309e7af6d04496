// The CUDA + cuBLAS implementation of MlpCompute, built into the CUDA plugin
// (libshardps_cuda.so, model/cuda_plugin). This header includes no CUDA headers; the CUDA code
// lives in mlp_cuda.cu. Prefer NewMlpCompute, which loads the plugin; a binary that links this
// directly links cudart and cuBLAS (tests and benchmarks only).
#ifndef SHARDPS_MODEL_MLP_MLP_CUDA_H_
#define SHARDPS_MODEL_MLP_MLP_CUDA_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/mlp/mlp_compute.h"

namespace shardps {

// An MlpCompute on CUDA device `device`: OpenCudaContext's errors (compute/cuda_device.h):
// FAILED_PRECONDITION "no CUDA device", INVALID_ARGUMENT for a device index out of range,
// INTERNAL when CUDA or cuBLAS cannot be initialized. Parameters and data are copied to device
// buffers that are cached and grown across calls; results come back to the caller's buffers.
absl::StatusOr<std::unique_ptr<MlpCompute>> NewMlpCudaCompute(int device = 0);

}  // namespace shardps

#endif  // SHARDPS_MODEL_MLP_MLP_CUDA_H_
