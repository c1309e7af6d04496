#include "compute/compute_device.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Runfile(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/shardps/compute/" + name;
}

TEST(ComputeDeviceTest, CpuNamesItsThreads) {
  const ComputeDevice one = ComputeDevice::Cpu(1);
  EXPECT_EQ(one.kind(), BackendKind::kCpu);
  EXPECT_EQ(one.num_threads(), 1);
  EXPECT_EQ(one.Name(), "cpu (Eigen, 1 thread)");
  EXPECT_EQ(ComputeDevice::Cpu(3).Name(), "cpu (Eigen, 3 threads)");
  const ComputeDevice all = ComputeDevice::Cpu(0);
  EXPECT_GE(all.num_threads(), 1);
  EXPECT_EQ(all.Name(), CpuComputeName(all.num_threads()));
  EXPECT_EQ(ResolveThreadCount(-2), all.num_threads());
  EXPECT_EQ(ResolveThreadCount(5), 5);
}

TEST(ComputeDeviceTest, OpenCpuNeverLoadsThePlugin) {
  absl::StatusOr<ComputeDevice> device =
      ComputeDevice::Open(BackendKind::kCpu, 2, {"/nonexistent/libshardps_cuda.so"});
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->kind(), BackendKind::kCpu);
  EXPECT_EQ(device->Name(), "cpu (Eigen, 2 threads)");
}

TEST(ComputeDeviceTest, AutoWithoutThePluginIsTheCpuAndSaysWhyOnce) {
  ::testing::internal::CaptureStderr();
  absl::StatusOr<ComputeDevice> device =
      ComputeDevice::Open(BackendKind::kAuto, 2, {"/nonexistent/libshardps_cuda.so"});
  const std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_EQ(device->kind(), BackendKind::kCpu);
  EXPECT_THAT(log, HasSubstr("compute backend auto: using the CPU, the GPU backend is not "
                             "available: no CUDA plugin (libshardps_cuda.so)"));
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
}

TEST(ComputeDeviceTest, GpuWithoutThePluginIsAnErrorNamingThePath) {
  absl::StatusOr<ComputeDevice> device =
      ComputeDevice::Open(BackendKind::kGpu, 1, {"/nonexistent/libshardps_cuda.so"});
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(device.status().message(), HasSubstr("/nonexistent/libshardps_cuda.so"));
}

TEST(ComputeDeviceTest, GpuWithoutADeviceIsAnError) {
  absl::StatusOr<ComputeDevice> device =
      ComputeDevice::Open(BackendKind::kGpu, 1, {Runfile("fake_cuda_plugin_unused.so")});
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(device.status().message(), "no CUDA device");
  // Under auto, the same plugin is the CPU, without a word.
  ::testing::internal::CaptureStderr();
  device = ComputeDevice::Open(BackendKind::kAuto, 1, {Runfile("fake_cuda_plugin_unused.so")});
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_THAT(device->Name(), StartsWith("cpu (Eigen, "));
}

// A device that exists but fails to initialize is an error under auto too.
TEST(ComputeDeviceTest, BrokenDeviceIsAnErrorEvenUnderAuto) {
  for (BackendKind kind : {BackendKind::kAuto, BackendKind::kGpu}) {
    absl::StatusOr<ComputeDevice> device =
        ComputeDevice::Open(kind, 1, {Runfile("fake_cuda_plugin_bad_device.so")});
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInternal);
    EXPECT_THAT(device.status().message(), HasSubstr("fake device fails to initialize"));
  }
}

}  // namespace
}  // namespace shardps
