// The CUDA side of cuda_context.h: plain C++ and CUDA, compiled by nvcc.
#include "compute/cuda_context.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <utility>

#include "compute/cuda_check.h"

namespace shardps {
namespace cuda {

int DeviceCount() {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    cudaGetLastError();  // Clear it, so that later CUDA calls do not report it again.
    return 0;
  }
  return n;
}

std::unique_ptr<Context> Context::Create(int device, std::string* error) {
  std::unique_ptr<Context> context(new Context(device));
  auto fail = [&](std::string message) {
    *error = std::move(message);
    return std::unique_ptr<Context>();
  };
  cudaError_t e = cudaSetDevice(device);
  if (e != cudaSuccess) return fail(CudaError("cudaSetDevice", e));
  cudaDeviceProp prop;
  e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return fail(CudaError("cudaGetDeviceProperties", e));
  context->name_ = prop.name;
  e = cudaStreamCreateWithFlags(&context->stream_, cudaStreamNonBlocking);
  if (e != cudaSuccess) return fail(CudaError("cudaStreamCreate", e));
  cublasStatus_t s = cublasCreate(&context->cublas_);
  if (s != CUBLAS_STATUS_SUCCESS) {
    context->cublas_ = nullptr;
    return fail(CublasError("cublasCreate", s));
  }
  s = cublasSetStream(context->cublas_, context->stream_);
  if (s != CUBLAS_STATUS_SUCCESS) return fail(CublasError("cublasSetStream", s));
  // Plain FP32 products (no TF32), so the GPU agrees with the CPU to float rounding.
  s = cublasSetMathMode(context->cublas_, CUBLAS_DEFAULT_MATH);
  if (s != CUBLAS_STATUS_SUCCESS) return fail(CublasError("cublasSetMathMode", s));
  return context;
}

Context::~Context() {
  cudaSetDevice(device_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

std::string Context::MakeCurrent() const {
  CUDA_RETURN_IF_ERROR("cudaSetDevice", cudaSetDevice(device_));
  return "";
}

void Context::Synchronize() const { cudaStreamSynchronize(stream_); }

}  // namespace cuda
}  // namespace shardps
