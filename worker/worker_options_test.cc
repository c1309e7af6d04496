#include "worker/worker_options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

absl::Status Parse(const std::vector<std::string>& args, WorkerOptions* options) {
  FlagParser flags("worker", "test");
  options->AddFlags(&flags);
  return flags.Parse(args, nullptr);
}

TEST(WorkerOptionsTest, DefaultsLeaveTheBackendToEachJob) {
  WorkerOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.backend, "");
  EXPECT_EQ(options.backend_override(), BackendKind::kAuto);
  EXPECT_EQ(options.threads, WorkerOptions::DefaultThreads());
  EXPECT_GE(options.threads, 1);
  EXPECT_EQ(options.test_only_delay_before_push_ms, 0);
}

TEST(WorkerOptionsTest, ValuesAreCheckedNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--backend=tpu", "--backend: unknown backend \"tpu\": expected auto, cpu or gpu"},
      {"--threads=0", "--threads must be 1..1024, got 0"},
      {"--threads=1025", "--threads must be 1..1024, got 1025"},
      {"--test_only_delay_before_push_ms=-1",
       "--test_only_delay_before_push_ms must be 0..600000, got -1"},
      {"--test_only_delay_before_push_ms=600001",
       "--test_only_delay_before_push_ms must be 0..600000, got 600001"},
  };
  for (const auto& [arg, message] : cases) {
    WorkerOptions options;
    absl::Status status = Parse({arg}, &options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << arg;
    EXPECT_EQ(status.message(), message) << arg;
  }
}

TEST(WorkerOptionsTest, AGivenBackendOverridesTheJobs) {
  WorkerOptions options;
  ASSERT_TRUE(Parse({"--backend=cpu", "--threads=1024"}, &options).ok());
  EXPECT_EQ(options.backend_override(), BackendKind::kCpu);
  EXPECT_EQ(options.threads, 1024);
  ASSERT_TRUE(Parse({"--backend=gpu"}, &options).ok());
  EXPECT_EQ(options.backend_override(), BackendKind::kGpu);
}

}  // namespace
}  // namespace shardps
