#include "compute/cuda_plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compute/cuda_plugin_abi.h"

namespace shardps {
namespace {

// This process's executable, links resolved; "" when /proc is not mounted.
std::string ExecutablePath() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// dlerror()'s message, without the "<path>: " it starts with when it is about `path` itself.
std::string DlError(const std::string& path) {
  const char* e = dlerror();
  std::string error = e != nullptr ? e : "unknown error";
  const std::string prefix = path + ": ";
  if (absl::StartsWith(error, prefix)) error.erase(0, prefix.size());
  return error;
}

// Whether a dlopen of `path` that failed failed because the file does not exist (rather than
// because it is no shared object, or one whose dependencies are missing).
bool Missing(const std::string& path) {
  if (path.find('/') == std::string::npos) return false;  // the dynamic loader's search
  return access(path.c_str(), F_OK) != 0 && (errno == ENOENT || errno == ENOTDIR);
}

}  // namespace

std::vector<std::string> CudaPluginSearchPath() {
  if (const char* env = std::getenv(kCudaPluginEnv); env != nullptr && *env != '\0') {
    return {env};
  }
  std::vector<std::string> paths;
  auto add = [&paths](std::string path) {
    if (std::find(paths.begin(), paths.end(), path) == paths.end()) {
      paths.push_back(std::move(path));
    }
  };
  const std::string exe = ExecutablePath();
  if (!exe.empty()) {
    const std::string dir = DirName(exe);
    add(absl::StrCat(dir, "/", kCudaPluginFileName));
    add(absl::StrCat(dir, "/../lib/shardps/", kCudaPluginFileName));
  }
  for (const char* var : {"RUNFILES_DIR", "TEST_SRCDIR"}) {
    if (const char* root = std::getenv(var); root != nullptr && *root != '\0') {
      add(absl::StrCat(root, "/", kCudaPluginRunfilesPath));
    }
  }
  if (!exe.empty()) add(absl::StrCat(exe, ".runfiles/", kCudaPluginRunfilesPath));
  return paths;
}

absl::StatusOr<CudaPlugin> CudaPlugin::Load(const std::vector<std::string>& paths) {
  std::vector<std::string> tried;
  for (const std::string& path : paths) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const std::string error = DlError(path);
      if (Missing(path)) {
        tried.push_back(absl::StrCat(path, ": ", error));
        continue;
      }
      return absl::FailedPreconditionError(
          absl::StrCat("CUDA plugin ", path, " cannot be loaded: ", error));
    }
    // From here on the handle stays open: dlclose would only decrement a count that a compute
    // made by an earlier Load of the same path may still need.
    auto lookup = [&](const char* name, void** fn) -> absl::Status {
      dlerror();
      *fn = dlsym(handle, name);
      if (*fn == nullptr) {
        return absl::FailedPreconditionError(
            absl::StrCat("CUDA plugin ", path, " is not a shardps CUDA plugin: no symbol ", name,
                         " (", DlError(path), ")"));
      }
      return absl::OkStatus();
    };
    // The version first: a plugin of another version may lack the other symbols.
    void* abi_version = nullptr;
    if (absl::Status s = lookup(kCudaPluginAbiVersionSymbol, &abi_version); !s.ok()) return s;
    const int version = reinterpret_cast<int (*)()>(abi_version)();
    if (version != kCudaPluginAbiVersion) {
      return absl::FailedPreconditionError(absl::StrCat(
          "CUDA plugin ", path, " has ABI version ", version, " but this binary needs ",
          kCudaPluginAbiVersion, ": install the plugin built with this binary"));
    }
    void* device_count = nullptr;
    void* open_device = nullptr;
    void* new_compute = nullptr;
    for (auto [name, fn] : {std::pair{kCudaPluginDeviceCountSymbol, &device_count},
                            std::pair{kCudaPluginOpenDeviceSymbol, &open_device},
                            std::pair{kCudaPluginNewComputeSymbol, &new_compute}}) {
      if (absl::Status s = lookup(name, fn); !s.ok()) return s;
    }
    return CudaPlugin(path, reinterpret_cast<DeviceCountFn>(device_count),
                      reinterpret_cast<OpenDeviceFn>(open_device),
                      reinterpret_cast<NewComputeFn>(new_compute));
  }
  if (tried.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no CUDA plugin (", kCudaPluginFileName, "): no place to look for it"));
  }
  return absl::FailedPreconditionError(absl::StrCat("no CUDA plugin (", kCudaPluginFileName,
                                                    ") found; tried ", absl::StrJoin(tried, "; ")));
}

int CudaPlugin::DeviceCount() const { return device_count_(); }

absl::Status CudaPlugin::PluginError(int code, char* error, size_t error_size) const {
  if (code == static_cast<int>(absl::StatusCode::kOk)) {
    code = static_cast<int>(absl::StatusCode::kUnknown);
  }
  if (error[0] == '\0') {
    std::snprintf(error, error_size, "the CUDA plugin %s failed and gave no reason",
                  path_.c_str());
  }
  return absl::Status(static_cast<absl::StatusCode>(code), error);
}

absl::StatusOr<std::string> CudaPlugin::OpenDevice(int device) const {
  int code = static_cast<int>(absl::StatusCode::kUnknown);
  char name[256] = "";
  char error[1024] = "";
  if (open_device_(device, name, sizeof(name), &code, error, sizeof(error)) == 1) {
    return std::string(name);
  }
  return PluginError(code, error, sizeof(error));
}

absl::StatusOr<void*> CudaPlugin::NewComputeObject(const char* kind, int device) const {
  int code = static_cast<int>(absl::StatusCode::kUnknown);
  char error[1024] = "";
  void* compute = new_compute_(kind, device, &code, error, sizeof(error));
  if (compute != nullptr) return compute;
  return PluginError(code, error, sizeof(error));
}

}  // namespace shardps
