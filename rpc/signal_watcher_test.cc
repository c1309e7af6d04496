#include "rpc/signal_watcher.h"

#include <signal.h>
#include <unistd.h>

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

// The signals each watcher took, in order.
class Taken {
 public:
  void Add(int signo) {
    absl::MutexLock lock(&mu_);
    signals_.push_back(signo);
  }
  // Waits until `n` signals were taken (or 60 s passed); returns them.
  std::vector<int> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return signals_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
    return signals_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> signals_ ABSL_GUARDED_BY(mu_);
};

class SignalWatcherTest : public ::testing::Test {
 protected:
  // Every test blocks the signals on the main thread before it starts a thread, so that all
  // threads of this process have them blocked, as a daemon's main() does.
  void SetUp() override { SignalWatcher::BlockTerminationSignals(); }
};

TEST_F(SignalWatcherTest, EachSignalReachesTheCallbackOnTheWatchersThread) {
  Taken taken;
  auto watcher = SignalWatcher::Start([&taken](int signo) { taken.Add(signo); });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  EXPECT_EQ(taken.WaitFor(1), std::vector<int>{SIGTERM});
  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  EXPECT_EQ(taken.WaitFor(2), (std::vector<int>{SIGTERM, SIGINT}));
}

TEST_F(SignalWatcherTest, TheDestructorJoinsAnIdleWatcherAtOnce) {
  const absl::Time start = absl::Now();
  for (int i = 0; i < 20; ++i) {
    auto watcher = SignalWatcher::Start([](int) { ADD_FAILURE() << "no signal was sent"; });
    ASSERT_TRUE(watcher.ok()) << watcher.status();
  }
  // No polling interval: waking the thread is immediate (the bound is for a loaded machine).
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST_F(SignalWatcherTest, ASignalAfterTheWatcherIsGoneWaitsForTheNextOne) {
  Taken first;
  {
    auto watcher = SignalWatcher::Start([&first](int signo) { first.Add(signo); });
    ASSERT_TRUE(watcher.ok()) << watcher.status();
  }
  // Pending, blocked: neither lost nor fatal; the next watcher takes it.
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  Taken second;
  auto watcher = SignalWatcher::Start([&second](int signo) { second.Add(signo); });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  EXPECT_EQ(second.WaitFor(1), std::vector<int>{SIGTERM});
  watcher->reset();
  EXPECT_EQ(first.WaitFor(0), std::vector<int>{});
}

}  // namespace
}  // namespace shardps
