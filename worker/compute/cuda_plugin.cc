// The CUDA plugin, libshardps_cuda.so: cuda_backend and dlrm_cuda behind the C interface of
// cuda_plugin_abi.h. Built as a shared object that links cudart and cuBLAS; cuda_plugin.lds
// keeps every other symbol local, so that the plugin's copies of shardps code never interpose
// on the binary's, nor the binary's on them.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/dlrm/dlrm_compute.h"
#include "model/dlrm/dlrm_cuda.h"
#include "worker/compute/backend.h"
#include "worker/compute/cuda_backend.h"
#include "worker/compute/cuda_plugin_abi.h"

namespace {

// The object out of `made`, or nullptr with its status in *code and error.
template <typename T>
T* Release(absl::StatusOr<std::unique_ptr<T>> made, int* code, char* error, size_t error_size) {
  if (made.ok()) return made->release();
  if (code != nullptr) *code = static_cast<int>(made.status().code());
  if (error != nullptr && error_size > 0) {
    const std::string message(made.status().message());
    const size_t n = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return nullptr;
}

}  // namespace

extern "C" {

int shardps_cuda_abi_version(void) { return shardps::kCudaPluginAbiVersion; }

int shardps_cuda_device_count(void) { return shardps::CudaDeviceCount(); }

shardps::ComputeBackend* shardps_cuda_new_backend(int device, int* code, char* error,
                                                  size_t error_size) {
  return Release(shardps::NewCudaBackend(device), code, error, error_size);
}

shardps::DlrmCompute* shardps_cuda_new_dlrm_compute(int device, int* code, char* error,
                                                    size_t error_size) {
  return Release(shardps::NewDlrmCudaCompute(device), code, error, error_size);
}

}  // extern "C"
