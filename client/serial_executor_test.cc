#include "client/serial_executor.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(SerialExecutorTest, RunsClosuresInOrderOnAThreadOfItsOwn) {
  absl::Mutex mu;
  std::vector<int> ran;
  std::vector<std::thread::id> threads;
  absl::Notification done;
  SerialExecutor executor;
  for (int i = 0; i < 20; ++i) {
    executor.Schedule([&, i] {
      absl::MutexLock lock(&mu);
      ran.push_back(i);
      threads.push_back(std::this_thread::get_id());
      if (i == 19) done.Notify();
    });
  }
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::MutexLock lock(&mu);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(ran[i], i);
  for (std::thread::id id : threads) {
    EXPECT_EQ(id, threads[0]);
    EXPECT_NE(id, std::this_thread::get_id());
  }
}

TEST(SerialExecutorTest, TheDestructorRunsWhatIsScheduledAndJoins) {
  std::atomic<int> ran{0};
  {
    SerialExecutor executor;
    absl::Notification release;
    executor.Schedule([&] {
      release.WaitForNotification();
      ++ran;
    });
    for (int i = 0; i < 5; ++i) executor.Schedule([&] { ++ran; });
    // A closure may schedule another: it runs before the destructor returns too.
    executor.Schedule([&] { executor.Schedule([&] { ++ran; }); });
    release.Notify();
  }
  EXPECT_EQ(ran.load(), 7);
}

TEST(SerialExecutorTest, AnExecutorNeverUsedIsDestroyedAtOnce) { SerialExecutor executor; }

TEST(SerialExecutorTest, AClosureMayDestroyItsExecutor) {
  auto executor = std::make_unique<SerialExecutor>();
  absl::Notification destroyed;
  SerialExecutor* raw = executor.get();
  raw->Schedule([&] {
    executor.reset();  // on the executor's own thread: it cannot join itself
    destroyed.Notify();
  });
  ASSERT_TRUE(destroyed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(executor, nullptr);
}

}  // namespace
}  // namespace shardps
