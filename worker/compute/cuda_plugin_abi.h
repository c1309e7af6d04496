// The C interface of the CUDA plugin, libshardps_cuda.so (cuda_plugin.cc): what the plugin
// exports and what its loader (cuda_plugin_loader.cc) looks up with dlsym. The worker and the
// evaluator link no CUDA library; they load the plugin, which links cudart and cuBLAS, only
// when a job asks for the GPU (ComputeBackend::Create with kAuto or kGpu).
//
// The functions have C names, so that dlsym finds them without C++ mangling. A backend still
// crosses as a C++ object (a ComputeBackend*, whose calls take and return absl types): the
// plugin and the binaries are built by the same toolchain against the same shared abseil, and
// the plugin keeps no state of its own that the binary also has (it links no flags, no
// registries, no CPU backend). kCudaPluginAbiVersion changes whenever this file, the
// ComputeBackend class (backend.h) or the DlrmCompute class (model/dlrm/dlrm_compute.h) does;
// the loader refuses a plugin with another version.
//
// Version 2 added shardps_cuda_new_dlrm_compute.
//
// Thread safety: the functions may be called from any thread, concurrently.
#ifndef SHARDPS_WORKER_COMPUTE_CUDA_PLUGIN_ABI_H_
#define SHARDPS_WORKER_COMPUTE_CUDA_PLUGIN_ABI_H_

#include <cstddef>

namespace shardps {

class ComputeBackend;
class DlrmCompute;

inline constexpr int kCudaPluginAbiVersion = 2;

// The plugin's file name, and the symbols it exports (the only ones: cuda_plugin.lds).
inline constexpr char kCudaPluginFileName[] = "libshardps_cuda.so";
inline constexpr char kCudaPluginAbiVersionSymbol[] = "shardps_cuda_abi_version";
inline constexpr char kCudaPluginDeviceCountSymbol[] = "shardps_cuda_device_count";
inline constexpr char kCudaPluginNewBackendSymbol[] = "shardps_cuda_new_backend";
inline constexpr char kCudaPluginNewDlrmComputeSymbol[] = "shardps_cuda_new_dlrm_compute";

}  // namespace shardps

extern "C" {

// kCudaPluginAbiVersion as the plugin was built.
int shardps_cuda_abi_version(void);

// CUDA devices visible to this process; 0 when there is no driver or device or the runtime
// reports any error.
int shardps_cuda_device_count(void);

// A new backend on CUDA device `device`, owned by the caller (delete it; the plugin stays
// loaded for the life of the process). On failure nullptr, with the absl::StatusCode in *code
// and the message, NUL-terminated and cut to fit, in error[0, error_size).
shardps::ComputeBackend* shardps_cuda_new_backend(int device, int* code, char* error,
                                                  size_t error_size);

// A new DLRM compute (model/dlrm/dlrm_compute.h) on CUDA device `device`; ownership and
// errors as for shardps_cuda_new_backend.
shardps::DlrmCompute* shardps_cuda_new_dlrm_compute(int device, int* code, char* error,
                                                    size_t error_size);

}  // extern "C"

#endif  // SHARDPS_WORKER_COMPUTE_CUDA_PLUGIN_ABI_H_
