#include "bench/rss.h"

#include <unistd.h>

#include <cstring>
#include <memory>

#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

constexpr int64_t kTouched = int64_t{64} << 20;

// Allocates and touches 64 MiB, so that it is resident.
std::unique_ptr<char[]> Touch() {
  std::unique_ptr<char[]> block(new char[kTouched]);
  std::memset(block.get(), 1, kTouched);
  return block;
}

TEST(RssTest, ReadsResidentAndPeakOfThisProcess) {
  absl::StatusOr<ProcessRss> before = ReadRss(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  EXPECT_GT(before->rss_bytes, 0);
  EXPECT_GE(before->peak_bytes, before->rss_bytes);
  std::unique_ptr<char[]> block = Touch();
  absl::StatusOr<ProcessRss> after = ReadRss(getpid());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GE(after->rss_bytes, before->rss_bytes + kTouched / 2);
  EXPECT_GE(after->peak_bytes, after->rss_bytes);
}

TEST(RssTest, ResetPeakBringsThePeakDownToWhatIsResident) {
  {
    std::unique_ptr<char[]> block = Touch();
    (void)block;
  }  // freed: the peak stays above what is resident now
  const absl::Status reset = ResetPeakRss(getpid());
  if (reset.code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "this kernel cannot reset VmHWM: " << reset;
  }
  ASSERT_TRUE(reset.ok()) << reset;
  absl::StatusOr<ProcessRss> rss = ReadRss(getpid());
  ASSERT_TRUE(rss.ok()) << rss.status();
  // Right after a reset the peak is what was resident then (give the allocator a little).
  EXPECT_LT(rss->peak_bytes, rss->rss_bytes + kTouched / 2);
}

TEST(RssTest, SamplerKeepsTheHighestResidentSize) {
  RssSampler sampler({getpid()}, absl::Milliseconds(1));
  std::unique_ptr<char[]> block = Touch();
  absl::StatusOr<ProcessRss> now = ReadRss(getpid());
  ASSERT_TRUE(now.ok());
  const std::vector<int64_t> max = sampler.Stop();  // samples once more before it returns
  ASSERT_EQ(max.size(), 1u);
  EXPECT_GE(max[0], now->rss_bytes - kTouched / 2);
  EXPECT_EQ(sampler.Stop(), max);  // idempotent
}

TEST(RssTest, AProcessThatIsGoneIsNotFound) {
  // pid_max is at most 2^22 on Linux.
  EXPECT_EQ(ReadRss(1 << 23).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace bench
}  // namespace shardps
