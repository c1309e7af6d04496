// The CUDA plugin, libshardps_cuda.so: cuda_backend behind the C interface of
// cuda_plugin_abi.h. Built as a shared object that links cudart and cuBLAS; cuda_plugin.lds
// keeps every other symbol local, so that the plugin's copies of shardps code never interpose
// on the binary's, nor the binary's on them.
#include <algorithm>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "worker/compute/backend.h"
#include "worker/compute/cuda_backend.h"
#include "worker/compute/cuda_plugin_abi.h"

extern "C" {

int shardps_cuda_abi_version(void) { return shardps::kCudaPluginAbiVersion; }

int shardps_cuda_device_count(void) { return shardps::CudaDeviceCount(); }

shardps::ComputeBackend* shardps_cuda_new_backend(int device, int* code, char* error,
                                                  size_t error_size) {
  absl::StatusOr<std::unique_ptr<shardps::ComputeBackend>> backend =
      shardps::NewCudaBackend(device);
  if (backend.ok()) return backend->release();
  if (code != nullptr) *code = static_cast<int>(backend.status().code());
  if (error != nullptr && error_size > 0) {
    const std::string message(backend.status().message());
    const size_t n = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), n);
    error[n] = '\0';
  }
  return nullptr;
}

}  // extern "C"
