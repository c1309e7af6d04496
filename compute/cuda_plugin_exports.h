// The half of the CUDA plugin's C interface (cuda_plugin_abi.h) that knows no model: its ABI
// version, the device count and shardps_cuda_open_device, defined in cuda_plugin_exports.cc;
// and the error protocol that the model floor's shardps_cuda_new_compute follows too.
//
// Thread safety: pure functions.
#ifndef SHARDPS_COMPUTE_CUDA_PLUGIN_EXPORTS_H_
#define SHARDPS_COMPUTE_CUDA_PLUGIN_EXPORTS_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardps {

// Writes `status`'s code to *code and its message, NUL-terminated and cut to fit, to
// error[0, error_size); either may be null (or error_size 0) to leave it out.
void WritePluginError(const absl::Status& status, int* code, char* error, size_t error_size);

// The object out of `made`, released to the caller; or nullptr with its status written as
// WritePluginError writes it.
template <typename T>
void* ReleaseToCaller(absl::StatusOr<std::unique_ptr<T>> made, int* code, char* error,
                      size_t error_size) {
  if (made.ok()) return made->release();
  WritePluginError(made.status(), code, error, error_size);
  return nullptr;
}

}  // namespace shardps

#endif  // SHARDPS_COMPUTE_CUDA_PLUGIN_EXPORTS_H_
