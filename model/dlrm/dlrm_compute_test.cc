// CreateDlrmCompute's choices, through the real CUDA plugin and fake ones (no GPU needed).
#include "model/dlrm/dlrm_compute.h"

#include <cstdlib>
#include <string>

#include "compute/cuda_plugin_loader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Runfile(const std::string& path) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/shardps/" + path;
}

TEST(CreateDlrmComputeTest, CpuIsTheCpu) {
  auto compute = CreateDlrmCompute(BackendKind::kCpu, 3, {"/nonexistent/plugin.so"});
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_EQ((*compute)->Name(), "cpu (Eigen, 3 threads)");
}

TEST(CreateDlrmComputeTest, AutoFallsBackToTheCpuWithoutAPlugin) {
  auto compute = CreateDlrmCompute(BackendKind::kAuto, 1, {"/nonexistent/plugin.so"});
  ASSERT_TRUE(compute.ok()) << compute.status();
  EXPECT_THAT((*compute)->Name(), StartsWith("cpu"));
  auto gpu = CreateDlrmCompute(BackendKind::kGpu, 1, {"/nonexistent/plugin.so"});
  EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(gpu.status().message()), HasSubstr("/nonexistent/plugin.so"));
}

// A device that fails to initialize is an error under kAuto too.
TEST(CreateDlrmComputeTest, BrokenDeviceIsAnError) {
  const std::string fake = Runfile("compute/fake_cuda_plugin_bad_device.so");
  for (BackendKind kind : {BackendKind::kAuto, BackendKind::kGpu}) {
    auto compute = CreateDlrmCompute(kind, 1, {fake});
    EXPECT_EQ(compute.status().code(), absl::StatusCode::kInternal) << compute.status();
    EXPECT_THAT(std::string(compute.status().message()), HasSubstr("fails to initialize"));
  }
}

// The real plugin loads (its ABI version matches) and makes a GPU compute when this machine
// has a device, and says "no CUDA device" when it has none.
TEST(CreateDlrmComputeTest, RealPlugin) {
  const std::string real = Runfile("model/cuda_plugin/libshardps_cuda.so");
  auto plugin = CudaPlugin::Load({real});
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  auto gpu = CreateDlrmCompute(BackendKind::kGpu, 1, {real});
  if (plugin->DeviceCount() == 0) {
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(gpu.status().message()), HasSubstr("no CUDA device"));
    auto compute = CreateDlrmCompute(BackendKind::kAuto, 1, {real});
    ASSERT_TRUE(compute.ok()) << compute.status();
    EXPECT_THAT((*compute)->Name(), StartsWith("cpu"));
  } else {
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_THAT((*gpu)->Name(), StartsWith("gpu"));
  }
}

}  // namespace
}  // namespace shardps
