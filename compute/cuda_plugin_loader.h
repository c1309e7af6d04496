// Loads the CUDA plugin, libshardps_cuda.so (cuda_plugin_abi.h), at run time, so that binaries
// start without any CUDA library installed (a CPU-only container image) and load cudart and
// cuBLAS only when a job asks for the GPU. The plugin is dlopen'ed RTLD_NOW | RTLD_LOCAL and
// never unloaded (the computes it makes live on); loading the same path again reuses the
// loaded copy, so a Load is cheap after the first and keeps no state here.
//
// Thread safety: every function is safe to call from any thread.
#ifndef SHARDPS_COMPUTE_CUDA_PLUGIN_LOADER_H_
#define SHARDPS_COMPUTE_CUDA_PLUGIN_LOADER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardps {

// The environment variable naming the plugin's path (search step 1).
inline constexpr char kCudaPluginEnv[] = "SHARDPS_CUDA_PLUGIN";

// The candidate paths, in this order, without duplicates:
//   1. $SHARDPS_CUDA_PLUGIN, when set and not empty: that path and no other, so that a wrong
//      path is reported rather than another plugin silently used;
//   2. beside the executable: <dir of /proc/self/exe>/libshardps_cuda.so;
//   3. the lib dir next to it: <dir of /proc/self/exe>/../lib/shardps/libshardps_cuda.so (the
//      container image: /usr/local/bin/worker and /usr/local/lib/shardps/);
//   4. Bazel's runfiles (`bazel run`, `bazel test`, and daemons those start):
//      <root>/shardps/model/cuda_plugin/libshardps_cuda.so for each root of $RUNFILES_DIR,
//      $TEST_SRCDIR and <executable>.runfiles.
std::vector<std::string> CudaPluginSearchPath();

// A loaded plugin: its path and its entry points. Cheap to copy.
class CudaPlugin {
 public:
  // Loads the first of `paths` that exists; a later one is tried only when no earlier file
  // exists. FAILED_PRECONDITION, naming the paths tried and dlerror() for each, when none
  // exists or `paths` is empty; FAILED_PRECONDITION naming the path and dlerror() when the
  // first that exists cannot be loaded (not a shared object, or the CUDA libraries it links are
  // missing), lacks one of the symbols, or was built for another kCudaPluginAbiVersion.
  static absl::StatusOr<CudaPlugin> Load(const std::vector<std::string>& paths);

  const std::string& path() const { return path_; }

  // CUDA devices visible; 0 without a driver or device (never fails).
  int DeviceCount() const;

  // Opens device `device` and closes it again; its name ("NVIDIA H100 80GB HBM3").
  // FAILED_PRECONDITION "no CUDA device" when there is none; INVALID_ARGUMENT when `device`
  // does not exist; INTERNAL "CUDA device <d>: ..." when it fails to initialize.
  absl::StatusOr<std::string> OpenDevice(int device) const;

  // A new compute of kind `kind` on device `device`, as T: the class the plugin makes for
  // that kind (the model floor knows which). The device's errors, as OpenDevice's; the
  // plugin's INVALID_ARGUMENT for a kind it lacks.
  template <typename T>
  absl::StatusOr<std::unique_ptr<T>> NewCompute(const char* kind, int device) const {
    absl::StatusOr<void*> made = NewComputeObject(kind, device);
    if (!made.ok()) return made.status();
    return std::unique_ptr<T>(static_cast<T*>(*made));
  }

 private:
  using DeviceCountFn = int (*)();
  using OpenDeviceFn = int (*)(int, char*, size_t, int*, char*, size_t);
  using NewComputeFn = void* (*)(const char*, int, int*, char*, size_t);

  CudaPlugin(std::string path, DeviceCountFn device_count, OpenDeviceFn open_device,
             NewComputeFn new_compute)
      : path_(std::move(path)),
        device_count_(device_count),
        open_device_(open_device),
        new_compute_(new_compute) {}

  // The plugin's object, never null.
  absl::StatusOr<void*> NewComputeObject(const char* kind, int device) const;
  // The status of a plugin call that failed with *code and error.
  absl::Status PluginError(int code, char* error, size_t error_size) const;

  std::string path_;
  DeviceCountFn device_count_;
  OpenDeviceFn open_device_;
  NewComputeFn new_compute_;
};

}  // namespace shardps

#endif  // SHARDPS_COMPUTE_CUDA_PLUGIN_LOADER_H_
