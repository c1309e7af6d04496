// The C interface of the CUDA plugin, libshardps_cuda.so: what the plugin exports and what its
// loader (cuda_plugin_loader.h) looks up with dlsym. Binaries link no CUDA library; they load
// the plugin, which links cudart and cuBLAS, only when a job asks for the GPU.
//
// The functions have C names, so that dlsym finds them without C++ mangling. A compute still
// crosses as a C++ object, handed back as void*: the model floor says which class each kind
// is, and casts it (CudaPlugin::NewCompute<T>). The plugin and the binaries are built by the
// same toolchain against the same shared abseil, and the plugin keeps no state of its own
// that the binary also has (no flags, no registries, no CPU compute). kCudaPluginAbiVersion
// changes whenever this file or a class that crosses it changes; the loader refuses a plugin
// with another version.
//
// Thread safety: the functions may be called from any thread, concurrently.
#ifndef SHARDPS_COMPUTE_CUDA_PLUGIN_ABI_H_
#define SHARDPS_COMPUTE_CUDA_PLUGIN_ABI_H_

#include <cstddef>

namespace shardps {

inline constexpr int kCudaPluginAbiVersion = 3;

// The plugin's file name, its place in Bazel's runfiles (<workspace>/<package>/<target>), and
// the symbols it exports (the only ones: model/cuda_plugin/cuda_plugin.lds).
inline constexpr char kCudaPluginFileName[] = "libshardps_cuda.so";
inline constexpr char kCudaPluginRunfilesPath[] = "shardps/model/cuda_plugin/libshardps_cuda.so";
inline constexpr char kCudaPluginAbiVersionSymbol[] = "shardps_cuda_abi_version";
inline constexpr char kCudaPluginDeviceCountSymbol[] = "shardps_cuda_device_count";
inline constexpr char kCudaPluginOpenDeviceSymbol[] = "shardps_cuda_open_device";
inline constexpr char kCudaPluginNewComputeSymbol[] = "shardps_cuda_new_compute";

}  // namespace shardps

extern "C" {

// Failures below write the absl::StatusCode to *code and the message, NUL-terminated and cut
// to fit, to error[0, error_size).

// kCudaPluginAbiVersion as the plugin was built.
int shardps_cuda_abi_version(void);

// CUDA devices visible to this process; 0 when there is no driver or device or the runtime
// reports any error.
int shardps_cuda_device_count(void);

// Opens CUDA device `device` (as a compute would: its stream and cuBLAS handle) and closes it
// again. 1 with the device's name in name[0, name_size), NUL-terminated; 0 on failure.
int shardps_cuda_open_device(int device, char* name, size_t name_size, int* code, char* error,
                             size_t error_size);

// A new compute of kind `kind` (a model's name for its CUDA compute) on device `device`, owned
// by the caller, who deletes it as the class that kind names (the plugin stays loaded for the
// life of the process). nullptr on failure, INVALID_ARGUMENT for a kind the plugin lacks.
void* shardps_cuda_new_compute(const char* kind, int device, int* code, char* error,
                               size_t error_size);

}  // extern "C"

#endif  // SHARDPS_COMPUTE_CUDA_PLUGIN_ABI_H_
