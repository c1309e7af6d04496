#include "rpc/executor.h"

#include <atomic>

#include "absl/synchronization/blocking_counter.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(ExecutorTest, RunsEveryClosure) {
  std::atomic<int> sum{0};
  {
    Executor executor(3);
    absl::BlockingCounter counter(100);
    for (int i = 1; i <= 100; ++i) {
      executor.Schedule([&sum, &counter, i] {
        sum += i;
        counter.DecrementCount();
      });
    }
    counter.Wait();
  }
  EXPECT_EQ(sum.load(), 5050);
}

TEST(ExecutorTest, DestructorDrainsQueue) {
  std::atomic<int> ran{0};
  {
    Executor executor(1);
    for (int i = 0; i < 50; ++i) executor.Schedule([&ran] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 50);
}

}  // namespace
}  // namespace shardps
