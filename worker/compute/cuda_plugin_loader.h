// Loads the CUDA plugin, libshardps_cuda.so (cuda_plugin_abi.h), at run time, so that the
// worker and the evaluator start without any CUDA library installed (a CPU-only container
// image) and load cudart and cuBLAS only when a job asks for the GPU.
//
// Where the plugin is looked for (CudaPluginSearchPath), in this order:
//   1. $SHARDPS_CUDA_PLUGIN, when set and not empty: that path and no other, so that a wrong
//      path is reported rather than another plugin silently used;
//   2. beside the executable: <dir of /proc/self/exe>/libshardps_cuda.so;
//   3. the lib dir next to it: <dir of /proc/self/exe>/../lib/shardps/libshardps_cuda.so (the
//      container image: /usr/local/bin/worker and /usr/local/lib/shardps/);
//   4. Bazel's runfiles (`bazel run`, `bazel test`, and daemons those start):
//      <root>/shardps/worker/compute/libshardps_cuda.so for each root of $RUNFILES_DIR,
//      $TEST_SRCDIR and <executable>.runfiles.
// The first candidate that exists is loaded; a later one is tried only when no earlier file
// exists. The plugin is dlopen'ed RTLD_NOW | RTLD_LOCAL and never unloaded (the backends it
// makes live on); loading the same path again reuses the loaded copy, so a Load is cheap
// after the first and keeps no state here.
//
// Thread safety: every function is safe to call from any thread.
#ifndef SHARDPS_WORKER_COMPUTE_CUDA_PLUGIN_LOADER_H_
#define SHARDPS_WORKER_COMPUTE_CUDA_PLUGIN_LOADER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/dlrm/dlrm_compute.h"
#include "worker/compute/backend.h"

namespace shardps {

// The environment variable naming the plugin's path (search step 1).
inline constexpr char kCudaPluginEnv[] = "SHARDPS_CUDA_PLUGIN";

// The candidate paths, in the order above, without duplicates.
std::vector<std::string> CudaPluginSearchPath();

// A loaded plugin: its path and its entry points. Cheap to copy.
class CudaPlugin {
 public:
  // Loads the first of `paths` that exists (see above). FAILED_PRECONDITION, naming the paths
  // tried and dlerror() for each, when none exists or `paths` is empty; FAILED_PRECONDITION
  // naming the path and dlerror() when the first that exists cannot be loaded (not a shared
  // object, or the CUDA libraries it links are missing), lacks one of the symbols, or was
  // built for another kCudaPluginAbiVersion.
  static absl::StatusOr<CudaPlugin> Load(const std::vector<std::string>& paths);

  const std::string& path() const { return path_; }

  // CUDA devices visible; 0 without a driver or device (never fails).
  int DeviceCount() const;

  // A backend on device `device`: NewCudaBackend's errors (cuda_backend.h), e.g.
  // FAILED_PRECONDITION "no CUDA device".
  absl::StatusOr<std::unique_ptr<ComputeBackend>> NewBackend(int device) const;

  // A DLRM compute on device `device`: NewDlrmCudaCompute's errors (model/dlrm/dlrm_cuda.h).
  absl::StatusOr<std::unique_ptr<DlrmCompute>> NewDlrmCompute(int device) const;

 private:
  using DeviceCountFn = int (*)();
  using NewBackendFn = ComputeBackend* (*)(int, int*, char*, size_t);
  using NewDlrmComputeFn = DlrmCompute* (*)(int, int*, char*, size_t);

  CudaPlugin(std::string path, DeviceCountFn device_count, NewBackendFn new_backend,
             NewDlrmComputeFn new_dlrm_compute)
      : path_(std::move(path)),
        device_count_(device_count),
        new_backend_(new_backend),
        new_dlrm_compute_(new_dlrm_compute) {}

  // The status of a factory call that returned nullptr with *code and error.
  absl::Status FactoryError(int code, char* error, size_t error_size) const;

  std::string path_;
  DeviceCountFn device_count_;
  NewBackendFn new_backend_;
  NewDlrmComputeFn new_dlrm_compute_;
};

}  // namespace shardps

#endif  // SHARDPS_WORKER_COMPUTE_CUDA_PLUGIN_LOADER_H_
