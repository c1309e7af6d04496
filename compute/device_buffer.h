// DeviceBuffer: CUDA device memory that only grows, so that steady-state steps allocate
// nothing. For .cu files (it includes the CUDA runtime's header).
//
// Thread safety: none; its owner serializes use.
#ifndef SHARDPS_COMPUTE_DEVICE_BUFFER_H_
#define SHARDPS_COMPUTE_DEVICE_BUFFER_H_

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

namespace shardps {
namespace cuda {

template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);
  }

  // Makes room for n elements (at least one, so that get() is never null after a success);
  // the old contents are not kept.
  cudaError_t Reserve(size_t n) {
    n = std::max<size_t>(n, 1);
    if (n <= capacity_) return cudaSuccess;
    if (ptr_ != nullptr) cudaFree(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
    const cudaError_t e = cudaMalloc(&ptr_, n * sizeof(T));
    if (e != cudaSuccess) {
      ptr_ = nullptr;
      return e;
    }
    capacity_ = n;
    return cudaSuccess;
  }

  T* get() const { return ptr_; }

 private:
  T* ptr_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace cuda
}  // namespace shardps

#endif  // SHARDPS_COMPUTE_DEVICE_BUFFER_H_
