#include "worker/compute/backend.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/compute/cuda_backend.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(BackendTest, CreatesCpu) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      ComputeBackend::Create(BackendKind::kCpu, 3);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_EQ((*backend)->Name(), "cpu (Eigen, 3 threads)");
}

TEST(BackendTest, DefaultThreadCountIsPositive) {
  std::unique_ptr<ComputeBackend> backend = ComputeBackend::Create(BackendKind::kCpu, 0).value();
  EXPECT_THAT(backend->Name(), StartsWith("cpu (Eigen, "));
  EXPECT_THAT(backend->Name(), ::testing::Not(HasSubstr(" 0 thread")));
}

// Passes on machines with and without a GPU: what it checks depends on which.
TEST(BackendTest, GpuNeedsADevice) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu =
      ComputeBackend::Create(BackendKind::kGpu, 1);
  if (CudaDeviceCount() == 0) {
    EXPECT_EQ(gpu.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(gpu.status().message(), HasSubstr("no CUDA device"));
  } else {
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_THAT((*gpu)->Name(), StartsWith("gpu ("));
    EXPECT_GT((*gpu)->Name().size(), 6u);
  }
}

TEST(BackendTest, AutoPicksGpuOnlyWhenPresent) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> backend =
      ComputeBackend::Create(BackendKind::kAuto, 2);
  ASSERT_TRUE(backend.ok()) << backend.status();
  EXPECT_THAT((*backend)->Name(), StartsWith(CudaDeviceCount() > 0 ? "gpu (" : "cpu (Eigen, 2"));
}

TEST(BackendTest, ParsesKinds) {
  EXPECT_EQ(ParseBackendKind("auto").value(), BackendKind::kAuto);
  EXPECT_EQ(ParseBackendKind("cpu").value(), BackendKind::kCpu);
  EXPECT_EQ(ParseBackendKind("gpu").value(), BackendKind::kGpu);
  EXPECT_THAT(ParseBackendKind("tpu").status().message(), HasSubstr("\"tpu\""));
}

// Without a GPU the factory's checks run before any CUDA work, so this holds everywhere.
TEST(BackendTest, CudaDeviceIndexOutOfRange) {
  absl::StatusOr<std::unique_ptr<ComputeBackend>> gpu = NewCudaBackend(1000);
  EXPECT_FALSE(gpu.ok());
  EXPECT_THAT(gpu.status().code(),
              ::testing::AnyOf(absl::StatusCode::kFailedPrecondition,
                               absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace shardps
