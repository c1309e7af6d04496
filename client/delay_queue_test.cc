#include "client/delay_queue.h"

#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(DelayQueueTest, RunsClosuresAtTheirTimeInOrder) {
  absl::Mutex mu;
  std::vector<int> ran;
  absl::Notification last;
  DelayQueue queue;
  const absl::Time start = absl::Now();
  auto record = [&](int i) {
    return [&, i](bool cancelled) {
      EXPECT_FALSE(cancelled);
      absl::MutexLock lock(&mu);
      ran.push_back(i);
      if (ran.size() == 3) last.Notify();
    };
  };
  queue.RunAt(start + absl::Milliseconds(60), record(3));
  queue.RunAt(start + absl::Milliseconds(30), record(1));
  queue.RunAt(start + absl::Milliseconds(30), record(2));  // same time: in order of adding
  ASSERT_TRUE(last.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(60));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(ran, (std::vector<int>{1, 2, 3}));
}

TEST(DelayQueueTest, AnEarlierItemDoesNotWaitForALaterOne) {
  DelayQueue queue;
  absl::Notification early;
  queue.RunAt(absl::Now() + absl::Hours(1), [](bool) {});
  const absl::Time start = absl::Now();
  queue.RunAt(start + absl::Milliseconds(1), [&](bool) { early.Notify(); });
  ASSERT_TRUE(early.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

TEST(DelayQueueTest, DestroyingItCancelsWhatIsStillQueued) {
  int cancelled = 0;
  {
    DelayQueue queue;
    for (int i = 0; i < 3; ++i) {
      queue.RunAt(absl::Now() + absl::Hours(1), [&](bool c) { cancelled += c ? 1 : 0; });
    }
  }
  EXPECT_EQ(cancelled, 3);
}

}  // namespace
}  // namespace shardps
