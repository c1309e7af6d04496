// Stand-ins for libshardps_cuda.so in tests, one per FAKE_CUDA_PLUGIN_* macro (BUILD.bazel):
//   BAD_ABI     exports the interface with an ABI version no binary has;
//   BAD_DEVICE  reports one device, which fails to initialize (as a broken GPU would);
//   NO_SYMBOLS  a shared object that exports none of the plugin's symbols;
//   UNUSED      a valid plugin with no device, which tests check is never loaded.
#include <cstdio>

#include "absl/status/status.h"
#include "compute/cuda_plugin_abi.h"

#ifndef FAKE_CUDA_PLUGIN_NO_SYMBOLS

extern "C" {

int shardps_cuda_abi_version(void) {
#ifdef FAKE_CUDA_PLUGIN_BAD_ABI
  return 999;
#else
  return shardps::kCudaPluginAbiVersion;
#endif
}

int shardps_cuda_device_count(void) {
#ifdef FAKE_CUDA_PLUGIN_BAD_DEVICE
  return 1;
#else
  return 0;
#endif
}

namespace {

void Fail(int device, int* code, char* error, size_t error_size) {
#ifdef FAKE_CUDA_PLUGIN_BAD_DEVICE
  *code = static_cast<int>(absl::StatusCode::kInternal);
  std::snprintf(error, error_size, "CUDA device %d: fake device fails to initialize", device);
#else
  *code = static_cast<int>(absl::StatusCode::kFailedPrecondition);
  std::snprintf(error, error_size, "no CUDA device");
#endif
}

}  // namespace

int shardps_cuda_open_device(int device, char* /*name*/, size_t /*name_size*/, int* code,
                             char* error, size_t error_size) {
  Fail(device, code, error, error_size);
  return 0;
}

void* shardps_cuda_new_compute(const char* /*kind*/, int device, int* code, char* error,
                               size_t error_size) {
  Fail(device, code, error, error_size);
  return nullptr;
}

}  // extern "C"

#else

extern "C" int fake_cuda_plugin_something_else(void) { return 0; }

#endif
