#include "compute/backend_kind.h"

#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

std::string Runfile(const std::string& name) {
  return std::string(std::getenv("TEST_SRCDIR")) + "/shardps/compute/" + name;
}

TEST(BackendKindTest, ParsesKinds) {
  EXPECT_EQ(ParseBackendKind("auto").value(), BackendKind::kAuto);
  EXPECT_EQ(ParseBackendKind("cpu").value(), BackendKind::kCpu);
  EXPECT_EQ(ParseBackendKind("gpu").value(), BackendKind::kGpu);
  EXPECT_THAT(ParseBackendKind("tpu").status().message(), HasSubstr("\"tpu\""));
}

TEST(BackendKindTest, CpuAndGpuStayAsTheyAre) {
  const std::string missing = "/nonexistent/libshardps_cuda.so";
  EXPECT_EQ(ResolveBackendKind(BackendKind::kCpu, {missing}).kind, BackendKind::kCpu);
  const BackendChoice gpu = ResolveBackendKind(BackendKind::kGpu, {missing});
  EXPECT_EQ(gpu.kind, BackendKind::kGpu);
  EXPECT_EQ(gpu.fallback_reason, "");
}

TEST(BackendKindTest, AutoIsTheGpuOnlyWithADevice) {
  const BackendChoice none = ResolveBackendKind(BackendKind::kAuto, {"/nonexistent/plugin.so"});
  EXPECT_EQ(none.kind, BackendKind::kCpu);
  EXPECT_THAT(none.fallback_reason, HasSubstr("/nonexistent/plugin.so"));
  const BackendChoice no_device =
      ResolveBackendKind(BackendKind::kAuto, {Runfile("fake_cuda_plugin_unused.so")});
  EXPECT_EQ(no_device.kind, BackendKind::kCpu);
  EXPECT_EQ(no_device.fallback_reason, "");  // the plugin loaded and saw no device
  const BackendChoice device =
      ResolveBackendKind(BackendKind::kAuto, {Runfile("fake_cuda_plugin_bad_device.so")});
  EXPECT_EQ(device.kind, BackendKind::kGpu);
}

}  // namespace
}  // namespace shardps
