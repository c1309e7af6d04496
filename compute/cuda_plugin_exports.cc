#include "compute/cuda_plugin_exports.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "compute/cuda_device.h"
#include "compute/cuda_plugin_abi.h"

namespace shardps {
namespace {

// Copies `text` into out[0, size), NUL-terminated and cut to fit.
void CopyOut(const std::string& text, char* out, size_t size) {
  if (out == nullptr || size == 0) return;
  const size_t n = std::min(text.size(), size - 1);
  std::memcpy(out, text.data(), n);
  out[n] = '\0';
}

}  // namespace

void WritePluginError(const absl::Status& status, int* code, char* error, size_t error_size) {
  if (code != nullptr) *code = static_cast<int>(status.code());
  CopyOut(std::string(status.message()), error, error_size);
}

}  // namespace shardps

extern "C" {

int shardps_cuda_abi_version(void) { return shardps::kCudaPluginAbiVersion; }

int shardps_cuda_device_count(void) { return shardps::CudaDeviceCount(); }

int shardps_cuda_open_device(int device, char* name, size_t name_size, int* code, char* error,
                             size_t error_size) {
  absl::StatusOr<std::unique_ptr<shardps::cuda::Context>> context =
      shardps::OpenCudaContext(device);
  if (!context.ok()) {
    shardps::WritePluginError(context.status(), code, error, error_size);
    return 0;
  }
  shardps::CopyOut((*context)->device_name(), name, name_size);
  return 1;
}

}  // extern "C"
