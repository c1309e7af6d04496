#include "ps_server/ps_options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

// Parses `args` into PsOptions; the status of the parse.
absl::Status Parse(const std::vector<std::string>& args, PsOptions* options) {
  FlagParser flags("ps", "test");
  options->AddFlags(&flags);
  return flags.Parse(args, nullptr);
}

TEST(PsOptionsTest, DefaultsAreTheDocumentedOnes) {
  PsOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.threads, 4);
  EXPECT_EQ(options.memory_budget_bytes, -1);
  EXPECT_EQ(options.snapshot_reserve, 0.5);
  EXPECT_EQ(options.max_reply_bytes, 64 << 20);
  EXPECT_EQ(options.test_snapshot_write_delay_ms, 0);
  EXPECT_EQ(options.max_request_memory_bytes, -1);
}

// Requests in flight are bounded inside the memory budget: by default a quarter of it (4
// requests of the cap when that is more, at most half); the rest is the store's.
TEST(PsOptionsTest, RequestMemoryComesOutOfTheBudget) {
  constexpr int64_t kMiB = int64_t{1} << 20;
  absl::StatusOr<RequestMemory> m = ResolveRequestMemory(-1, 1024 * kMiB, 16 * kMiB);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->request_bytes, 256 * kMiB);
  EXPECT_EQ(m->store_bytes, 768 * kMiB);
  m = ResolveRequestMemory(-1, 128 * kMiB, 16 * kMiB);  // 4 requests of the cap
  EXPECT_EQ(m->request_bytes, 64 * kMiB);
  m = ResolveRequestMemory(-1, 64 * kMiB, 16 * kMiB);  // at most half the budget
  EXPECT_EQ(m->request_bytes, 32 * kMiB);
  m = ResolveRequestMemory(-1, 0, 100 * kMiB);  // no budget: no bound
  EXPECT_EQ(m->request_bytes, 0);
  EXPECT_EQ(m->store_bytes, 0);
  m = ResolveRequestMemory(0, 1024 * kMiB, 16 * kMiB);  // no bound
  EXPECT_EQ(m->request_bytes, 0);
  EXPECT_EQ(m->store_bytes, 1024 * kMiB);
  m = ResolveRequestMemory(8 * kMiB, 1024 * kMiB, 16 * kMiB);
  EXPECT_EQ(m->request_bytes, 8 * kMiB);
  EXPECT_EQ(m->store_bytes, 1016 * kMiB);
  m = ResolveRequestMemory(1024 * kMiB, 1024 * kMiB, 16 * kMiB);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("--max_request_memory_bytes"), std::string::npos);
}

TEST(PsOptionsTest, ValuesOutsideTheirRangesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--threads=0", "--threads must be 1..256, got 0"},
      {"--threads=257", "--threads must be 1..256, got 257"},
      {"--memory_budget_bytes=-2", "--memory_budget_bytes must be >= -1, got -2"},
      {"--snapshot_reserve=1", "--snapshot_reserve must be in [0, 1), got 1"},
      {"--snapshot_reserve=-0.5", "--snapshot_reserve must be in [0, 1), got -0.5"},
      {"--max_reply_bytes=-1", "--max_reply_bytes must be >= 0, got -1"},
      {"--test_snapshot_write_delay_ms=-1", "--test_snapshot_write_delay_ms must be >= 0, got -1"},
  };
  for (const auto& [arg, message] : cases) {
    PsOptions options;
    absl::Status status = Parse({arg}, &options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << arg;
    EXPECT_EQ(status.message(), message) << arg;
  }
  PsOptions options;
  ASSERT_TRUE(Parse({"--threads=256", "--memory_budget_bytes=0", "--snapshot_reserve=0",
                     "--max_reply_bytes=0", "--test_snapshot_write_delay_ms=600000"},
                    &options)
                  .ok());
  EXPECT_EQ(options.threads, 256);
  EXPECT_EQ(options.test_snapshot_write_delay_ms, 600000);
}

TEST(PsOptionsTest, TheDefaultBudgetIsNinetyPercentOfTheProcessLimit) {
  int reads = 0;
  auto limit = [&reads]() -> absl::StatusOr<MemoryLimit> {
    ++reads;
    return MemoryLimit{1000, "memory.max"};
  };
  absl::StatusOr<BudgetSetting> budget = ResolveMemoryBudget(-1, limit);
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_EQ(budget->bytes, 900);
  EXPECT_EQ(budget->source, "90% of 1000 bytes (memory.max)");
  // A budget given is taken as it is, without reading the limit.
  budget = ResolveMemoryBudget(12345, limit);
  ASSERT_TRUE(budget.ok()) << budget.status();
  EXPECT_EQ(budget->bytes, 12345);
  EXPECT_EQ(budget->source, "--memory_budget_bytes");
  EXPECT_EQ(reads, 1);
}

TEST(PsOptionsTest, AnUnreadableLimitIsABadConfigurationNamingTheFlag) {
  absl::StatusOr<BudgetSetting> budget = ResolveMemoryBudget(-1, [] {
    return absl::StatusOr<MemoryLimit>(absl::FailedPreconditionError("no MemTotal"));
  });
  EXPECT_EQ(budget.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(budget.status().message().find("--memory_budget_bytes (set it)"), std::string::npos);
  EXPECT_NE(budget.status().message().find("no MemTotal"), std::string::npos);
}

}  // namespace
}  // namespace shardps
