#include "rpc/orphan_clock.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(OrphanClockTest, CountsFromStartUntilTheFirstContact) {
  OrphanClock clock(absl::Seconds(10), absl::Seconds(100));
  EXPECT_FALSE(clock.contacted());
  EXPECT_EQ(clock.last_contact(), absl::Seconds(100));
  EXPECT_EQ(clock.Deadline(), absl::Seconds(110));
  EXPECT_FALSE(clock.Expired(absl::Seconds(109)));
  EXPECT_TRUE(clock.Expired(absl::Seconds(110)));
}

TEST(OrphanClockTest, EachContactMovesTheDeadline) {
  OrphanClock clock(absl::Seconds(10), absl::Seconds(100));
  clock.NoteContact(absl::Seconds(105));
  EXPECT_TRUE(clock.contacted());
  EXPECT_EQ(clock.Deadline(), absl::Seconds(115));
  EXPECT_FALSE(clock.Expired(absl::Seconds(114)));
  clock.NoteContact(absl::Seconds(114));
  EXPECT_FALSE(clock.Expired(absl::Seconds(123)));
  EXPECT_TRUE(clock.Expired(absl::Seconds(124)));
}

TEST(OrphanClockTest, ZeroTimeoutNeverExpires) {
  OrphanClock clock(absl::ZeroDuration(), absl::Seconds(1));
  EXPECT_FALSE(clock.enabled());
  EXPECT_EQ(clock.Deadline(), absl::InfiniteDuration());
  EXPECT_FALSE(clock.Expired(absl::Hours(1e6)));
}

TEST(OrphanClockTest, ConcurrentContactsLeaveOneOfTheirTimes) {
  OrphanClock clock(absl::Seconds(1), absl::ZeroDuration());
  std::vector<std::thread> threads;
  for (int t = 1; t <= 4; ++t) {
    threads.emplace_back([&clock, t] {
      for (int i = 0; i < 10000; ++i) clock.NoteContact(absl::Seconds(t));
    });
  }
  for (std::thread& t : threads) t.join();
  const absl::Duration last = clock.last_contact();
  EXPECT_TRUE(last == absl::Seconds(1) || last == absl::Seconds(2) || last == absl::Seconds(3) ||
              last == absl::Seconds(4))
      << last;
}

TEST(OrphanClockTest, MonotonicNowDoesNotGoBack) {
  absl::Duration previous = OrphanClock::MonotonicNow();
  for (int i = 0; i < 1000; ++i) {
    absl::Duration now = OrphanClock::MonotonicNow();
    EXPECT_GE(now, previous);
    previous = now;
  }
}

}  // namespace
}  // namespace shardps
