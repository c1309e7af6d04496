#include "model/mlp/mlp_compute.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "compute/backend_kind.h"
#include "compute/cuda_plugin_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Runfile(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/shardps/compute/" + name;
}

// A path where no plugin is.
std::string MissingPlugin() {
  return std::string(std::getenv("TEST_TMPDIR")) + "/nowhere/libshardps_cuda.so";
}

// Devices the real plugin (found by the default search, here in the runfiles) sees: 0 on a
// machine without a GPU.
int RealDeviceCount() {
  absl::StatusOr<CudaPlugin> plugin = CudaPlugin::Load(CudaPluginSearchPath());
  EXPECT_TRUE(plugin.ok()) << plugin.status();
  return plugin.ok() ? plugin->DeviceCount() : 0;
}

TEST(MlpComputeTest, CreatesCpu) {
  absl::StatusOr<std::unique_ptr<MlpCompute>> backend =
      CreateMlpCompute(BackendKind::kCpu, 3);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->Name(), "cpu (Eigen, 3 threads)");
}

TEST(MlpComputeTest, DefaultThreadCountIsPositive) {
  std::unique_ptr<MlpCompute> backend = CreateMlpCompute(BackendKind::kCpu, 0).value();
  EXPECT_THAT(backend->Name(), StartsWith("cpu (Eigen, "));
  EXPECT_THAT(backend->Name(), ::testing::Not(HasSubstr(" 0 thread")));
}

TEST(MlpComputeTest, CpuNeverLoadsThePlugin) {
  const std::string plugin = Runfile("fake_cuda_plugin_unused.so");
  ASSERT_TRUE(CreateMlpCompute(BackendKind::kCpu, 1, {plugin}).ok());
  EXPECT_EQ(ResolveBackendKind(BackendKind::kCpu, {plugin}).kind, BackendKind::kCpu);
  EXPECT_EQ(ResolveBackendKind(BackendKind::kGpu, {plugin}).kind, BackendKind::kGpu);
  // RTLD_NOLOAD: a handle only when the library is loaded already.
  EXPECT_EQ(dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);
  // The check itself can fail: once loaded, it is seen.
  ASSERT_TRUE(CudaPlugin::Load({plugin}).ok());
  EXPECT_NE(dlopen(plugin.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr);
}

TEST(MlpComputeTest, AutoWithoutThePluginFallsBackToCpuAndSaysWhy) {
  const BackendChoice choice = ResolveBackendKind(BackendKind::kAuto, {MissingPlugin()});
  EXPECT_EQ(choice.kind, BackendKind::kCpu);
  EXPECT_THAT(choice.fallback_reason, HasSubstr(MissingPlugin()));
  EXPECT_THAT(choice.fallback_reason, HasSubstr("No such file or directory"));

  ::testing::internal::CaptureStderr();
  absl::StatusOr<std::unique_ptr<MlpCompute>> backend =
      CreateMlpCompute(BackendKind::kAuto, 2, {MissingPlugin()});
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->Name(), "cpu (Eigen, 2 threads)");
  EXPECT_THAT(log, HasSubstr("compute backend auto: using the CPU"));
  EXPECT_THAT(log, HasSubstr(MissingPlugin()));
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

TEST(MlpComputeTest, GpuWithoutThePluginIsAnErrorNamingThePath) {
  absl::StatusOr<std::unique_ptr<MlpCompute>> backend =
      CreateMlpCompute(BackendKind::kGpu, 2, {MissingPlugin()});
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(backend.status().message(), HasSubstr("no CUDA plugin (libshardps_cuda.so)"));
  EXPECT_THAT(backend.status().message(), HasSubstr(MissingPlugin()));
  EXPECT_THAT(backend.status().message(), HasSubstr("No such file or directory"));
}

// A device that exists but fails to initialize stays an error under auto.
TEST(MlpComputeTest, BrokenDeviceIsAnErrorEvenUnderAuto) {
  const std::string plugin = Runfile("fake_cuda_plugin_bad_device.so");
  EXPECT_EQ(ResolveBackendKind(BackendKind::kAuto, {plugin}).kind, BackendKind::kGpu);
  for (BackendKind kind : {BackendKind::kAuto, BackendKind::kGpu}) {
    absl::StatusOr<std::unique_ptr<MlpCompute>> backend =
        CreateMlpCompute(kind, 2, {plugin});
    EXPECT_EQ(backend.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(backend.status().message(), HasSubstr("fake device fails to initialize"));
  }
}

// The real plugin, found by the default search (the runfiles here). Passes on machines with
// and without a GPU: what it checks depends on which.
TEST(MlpComputeTest, GpuNeedsADevice) {
  absl::StatusOr<std::unique_ptr<MlpCompute>> gpu =
      CreateMlpCompute(BackendKind::kGpu, 1);
  if (RealDeviceCount() == 0) {
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(gpu.status().message(), HasSubstr("no CUDA device"));
  } else {
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_THAT((*gpu)->Name(), StartsWith("gpu ("));
    EXPECT_GT((*gpu)->Name().size(), 6u);
  }
}

TEST(MlpComputeTest, AutoPicksGpuOnlyWhenPresent) {
  const BackendChoice choice = ResolveBackendKind(BackendKind::kAuto);
  EXPECT_EQ(choice.fallback_reason, "");  // the plugin loaded
  EXPECT_EQ(choice.kind, RealDeviceCount() > 0 ? BackendKind::kGpu : BackendKind::kCpu);
  absl::StatusOr<std::unique_ptr<MlpCompute>> backend =
      CreateMlpCompute(BackendKind::kAuto, 2);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_THAT((*backend)->Name(), StartsWith(RealDeviceCount() > 0 ? "gpu (" : "cpu (Eigen, 2"));
}

}  // namespace
}  // namespace shardps
