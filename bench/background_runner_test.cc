// BackgroundRunner: work runs on another thread while the caller goes on; offered work while
// busy is declined; Wait and the destructor wait for the work in hand.
#include "bench/background_runner.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

TEST(BackgroundRunnerTest, RunsOneAtATimeAndDeclinesWhileBusy) {
  BackgroundRunner runner;
  EXPECT_FALSE(runner.busy());
  absl::Notification release, started;
  std::atomic<int> ran{0};
  std::thread::id worker;
  ASSERT_TRUE(runner.TryStart([&] {
    worker = std::this_thread::get_id();
    started.Notify();
    release.WaitForNotification();
    ++ran;
  }));
  started.WaitForNotification();
  EXPECT_NE(worker, std::this_thread::get_id());
  EXPECT_TRUE(runner.busy());
  EXPECT_FALSE(runner.TryStart([&] { ran += 100; })) << "accepted work while busy";
  release.Notify();
  runner.Wait();
  EXPECT_FALSE(runner.busy());
  EXPECT_EQ(ran.load(), 1);
  EXPECT_TRUE(runner.TryStart([&] { ++ran; }));
  runner.Wait();
  EXPECT_EQ(ran.load(), 2);
}

TEST(BackgroundRunnerTest, DestructorWaitsForTheWorkInHand) {
  std::atomic<bool> done{false};
  {
    BackgroundRunner runner;
    ASSERT_TRUE(runner.TryStart([&] {
      absl::SleepFor(absl::Milliseconds(50));
      done = true;
    }));
  }
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace bench
}  // namespace shardps
