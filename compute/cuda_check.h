// Error texts and early-return macros for CUDA and cuBLAS calls, for .cu files and code that
// includes the CUDA headers. Plain C++ (nvcc's host compiler does not take absl): an error is
// a std::string, "" for none.
//
// Thread safety: pure functions.
#ifndef SHARDPS_COMPUTE_CUDA_CHECK_H_
#define SHARDPS_COMPUTE_CUDA_CHECK_H_

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>

namespace shardps {
namespace cuda {

// "CUDA <what>: <error name> (<error text>)".
inline std::string CudaError(const char* what, cudaError_t e) {
  return std::string("CUDA ") + what + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
         ")";
}

// "cuBLAS <what>: <status text>".
inline std::string CublasError(const char* what, cublasStatus_t s) {
  return std::string("cuBLAS ") + what + ": " + cublasGetStatusString(s);
}

}  // namespace cuda
}  // namespace shardps

// In a function that returns std::string: returns CudaError(what, e) when expr yields an error.
#define CUDA_RETURN_IF_ERROR(what, expr)                      \
  do {                                                        \
    const cudaError_t cuda_err_ = (expr);                     \
    if (cuda_err_ != cudaSuccess) {                           \
      return ::shardps::cuda::CudaError(what, cuda_err_);     \
    }                                                         \
  } while (0)

// As CUDA_RETURN_IF_ERROR, for a cuBLAS call.
#define CUBLAS_RETURN_IF_ERROR(what, expr)                    \
  do {                                                        \
    const cublasStatus_t cublas_err_ = (expr);                \
    if (cublas_err_ != CUBLAS_STATUS_SUCCESS) {               \
      return ::shardps::cuda::CublasError(what, cublas_err_); \
    }                                                         \
  } while (0)

// In a function that returns std::string: returns expr's message when it is not empty.
#define RETURN_IF_MESSAGE(expr)             \
  do {                                      \
    std::string message_ = (expr);          \
    if (!message_.empty()) return message_; \
  } while (0)

#endif  // SHARDPS_COMPUTE_CUDA_CHECK_H_
