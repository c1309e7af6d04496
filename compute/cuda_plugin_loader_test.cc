#include "compute/cuda_plugin_loader.h"

#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "compute/cuda_plugin_abi.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Runfile(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/shardps/compute/" + name;
}

std::string RealPlugin() {
  return std::string(std::getenv("TEST_SRCDIR")) + "/shardps/model/cuda_plugin/libshardps_cuda.so";
}

// What a model's compute would be; the fakes make none.
struct AnyCompute {};

std::string Missing(const std::string& name) {
  return std::string(std::getenv("TEST_TMPDIR")) + "/nowhere/" + name;
}

std::string ExeDir() {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  std::string exe(buf, n > 0 ? static_cast<size_t>(n) : 0);
  return exe.substr(0, exe.rfind('/'));
}

// Restores an environment variable when it goes out of scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr) {
      setenv(name, value, 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_.has_value()) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(CudaPluginLoaderTest, SearchPathOrder) {
  ScopedEnv plugin_env(kCudaPluginEnv, nullptr);
  ScopedEnv runfiles_env("RUNFILES_DIR", "/runfiles");
  ScopedEnv srcdir_env("TEST_SRCDIR", "/srcdir");
  const std::string exe = ExeDir() + "/cuda_plugin_loader_test";
  EXPECT_THAT(
      CudaPluginSearchPath(),
      ElementsAre(ExeDir() + "/libshardps_cuda.so", ExeDir() + "/../lib/shardps/libshardps_cuda.so",
                  "/runfiles/shardps/model/cuda_plugin/libshardps_cuda.so",
                  "/srcdir/shardps/model/cuda_plugin/libshardps_cuda.so",
                  exe + ".runfiles/shardps/model/cuda_plugin/libshardps_cuda.so"));
}

TEST(CudaPluginLoaderTest, EnvironmentVariableIsTheOnlyPlace) {
  ScopedEnv plugin_env(kCudaPluginEnv, "/opt/cuda-plugin/libshardps_cuda.so");
  EXPECT_THAT(CudaPluginSearchPath(), ElementsAre("/opt/cuda-plugin/libshardps_cuda.so"));
  ScopedEnv empty_env(kCudaPluginEnv, "");
  EXPECT_GT(CudaPluginSearchPath().size(), 1u);
}

TEST(CudaPluginLoaderTest, RealPluginLoads) {
  absl::StatusOr<CudaPlugin> plugin = CudaPlugin::Load({RealPlugin()});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_EQ(plugin->path(), RealPlugin());
  const int devices = plugin->DeviceCount();
  EXPECT_GE(devices, 0);
  std::cout << "the CUDA plugin sees " << devices << " device(s)\n";
  // Past the last device, and on a machine without a GPU at device 0 too.
  absl::StatusOr<std::string> device = plugin->OpenDevice(devices);
  if (devices == 0) {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(device.status().message(), HasSubstr("no CUDA device"));
  } else {
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(device.status().message(), HasSubstr("does not exist"));
    absl::StatusOr<std::string> first = plugin->OpenDevice(0);
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_FALSE(first->empty());
  }
  // A kind that no model has.
  absl::StatusOr<std::unique_ptr<AnyCompute>> unknown =
      plugin->NewCompute<AnyCompute>("no such model", 0);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(), HasSubstr("\"no such model\""));
}

TEST(CudaPluginLoaderTest, FirstExistingCandidateWins) {
  absl::StatusOr<CudaPlugin> plugin =
      CudaPlugin::Load({Missing("a.so"), Missing("b/c.so"), RealPlugin(),
                        Runfile("fake_cuda_plugin_bad_abi.so")});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_EQ(plugin->path(), RealPlugin());

  // One that exists but fails is the answer: a later candidate is not tried.
  plugin = CudaPlugin::Load(
      {Missing("a.so"), Runfile("fake_cuda_plugin_bad_abi.so"), RealPlugin()});
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plugin.status().message(), HasSubstr(Runfile("fake_cuda_plugin_bad_abi.so")));
}

TEST(CudaPluginLoaderTest, NoneFoundNamesEveryPathAndTheLoadersError) {
  absl::StatusOr<CudaPlugin> plugin = CudaPlugin::Load({Missing("a.so"), Missing("b.so")});
  EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(plugin.status().message(),
              HasSubstr("no CUDA plugin (libshardps_cuda.so) found; tried " + Missing("a.so") +
                        ": cannot open shared object file: No such file or directory; " +
                        Missing("b.so") + ": cannot open"));
  EXPECT_EQ(CudaPlugin::Load({}).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CudaPluginLoaderTest, RejectsWhatIsNotThePlugin) {
  struct Case {
    std::string path;
    std::string message;
  };
  const std::vector<Case> cases = {
      {Runfile("cuda_plugin_abi.h"), "cannot be loaded: "},
      {Runfile("fake_cuda_plugin_no_symbols.so"),
       "is not a shardps CUDA plugin: no symbol shardps_cuda_abi_version"},
      {Runfile("fake_cuda_plugin_bad_abi.so"),
       "has ABI version 999 but this binary needs " + std::to_string(kCudaPluginAbiVersion) +
           ": install the plugin built with this binary"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CudaPlugin> plugin = CudaPlugin::Load({c.path});
    EXPECT_EQ(plugin.status().code(), absl::StatusCode::kFailedPrecondition) << c.path;
    EXPECT_THAT(plugin.status().message(), HasSubstr("CUDA plugin " + c.path + " ")) << c.path;
    EXPECT_THAT(plugin.status().message(), HasSubstr(c.message)) << c.path;
  }
}

TEST(CudaPluginLoaderTest, PassesTheDevicesErrorThrough) {
  absl::StatusOr<CudaPlugin> plugin = CudaPlugin::Load({Runfile("fake_cuda_plugin_bad_device.so")});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  EXPECT_EQ(plugin->DeviceCount(), 1);
  absl::StatusOr<std::string> device = plugin->OpenDevice(0);
  EXPECT_EQ(device.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(device.status().message(), "CUDA device 0: fake device fails to initialize");
  absl::StatusOr<std::unique_ptr<AnyCompute>> compute = plugin->NewCompute<AnyCompute>("mlp", 0);
  EXPECT_EQ(compute.status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(compute.status().message(), "CUDA device 0: fake device fails to initialize");
}

}  // namespace
}  // namespace shardps
