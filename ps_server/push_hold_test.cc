#include "ps_server/push_hold.h"

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

// What ran, in order, from any thread.
class Log {
 public:
  std::function<void()> Entry(int value) {
    return [this, value] {
      absl::MutexLock lock(&mu_);
      values_.push_back(value);
    };
  }
  // Waits up to 10 s for `n` entries.
  std::vector<int> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return values_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(10));
    return values_;
  }
  std::vector<int> Now() {
    absl::MutexLock lock(&mu_);
    return values_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> values_ ABSL_GUARDED_BY(mu_);
};

absl::Time Later() { return absl::Now() + absl::Seconds(60); }

TEST(PushHoldTest, WithoutAHoldEveryPushRunsAtOnce) {
  PushHold hold(0);
  Log log;
  hold.Admit(3, log.Entry(3));
  hold.Admit(std::nullopt, log.Entry(-1));
  EXPECT_EQ(log.Now(), (std::vector<int>{3, -1}));
  EXPECT_EQ(hold.held(), 0);
}

TEST(PushHoldTest, HoldsStepsFromTheBarrierUntilTheSnapshotThenRunsThemInOrder) {
  PushHold hold(0);
  Log log;
  ASSERT_TRUE(hold.Hold(5, Later()).ok());
  hold.Admit(6, log.Entry(6));
  hold.Admit(4, log.Entry(4));               // below the barrier: applied now
  hold.Admit(std::nullopt, log.Entry(-1));   // no step: never held
  hold.Admit(5, log.Entry(5));
  EXPECT_EQ(log.Now(), (std::vector<int>{4, -1}));
  EXPECT_EQ(hold.held(), 2);
  ASSERT_TRUE(hold.BeginSnapshot(5).ok());
  hold.Admit(7, log.Entry(7));  // still held while the snapshot is taken
  EXPECT_EQ(hold.held(), 3);
  EXPECT_EQ(log.Now(), (std::vector<int>{4, -1}));
  hold.EndSnapshot();
  EXPECT_EQ(log.WaitFor(5), (std::vector<int>{4, -1, 6, 5, 7}));
  EXPECT_EQ(hold.held(), 0);
  hold.Admit(8, log.Entry(8));  // the hold is over
  EXPECT_EQ(log.Now().back(), 8);
}

TEST(PushHoldTest, AnExpiredHoldRunsWhatItHeldAndRefusesItsSnapshot) {
  PushHold hold(2);
  Log log;
  ASSERT_TRUE(hold.Hold(5, absl::Now() + absl::Milliseconds(50)).ok());
  hold.Admit(5, log.Entry(5));
  EXPECT_EQ(log.WaitFor(1), (std::vector<int>{5}));
  const absl::Status s = hold.BeginSnapshot(5);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_NE(s.message().find("deadline passed"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("ps task 2"), absl::string_view::npos) << s;
}

TEST(PushHoldTest, ASecondHoldFromTheSameStepExtendsIt) {
  PushHold hold(0);
  Log log;
  ASSERT_TRUE(hold.Hold(5, absl::Now() + absl::Milliseconds(100)).ok());
  ASSERT_TRUE(hold.Hold(5, Later()).ok());
  hold.Admit(5, log.Entry(5));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_TRUE(log.Now().empty());
  EXPECT_TRUE(hold.BeginSnapshot(5).ok());
  hold.EndSnapshot();
  EXPECT_EQ(log.WaitFor(1), (std::vector<int>{5}));
}

TEST(PushHoldTest, AnotherStepWhileHoldingIsRefused) {
  PushHold hold(0);
  ASSERT_TRUE(hold.Hold(5, Later()).ok());
  EXPECT_EQ(hold.Hold(9, Later()).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(hold.Hold(-1, Later()).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(hold.BeginSnapshot(5).ok());
  EXPECT_EQ(hold.BeginSnapshot(5).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(hold.Hold(5, Later()).code(), absl::StatusCode::kFailedPrecondition);
  hold.EndSnapshot();
  EXPECT_TRUE(hold.Hold(9, Later()).ok());  // the next cut
}

TEST(PushHoldTest, ReleaseRunsWhatWasHeldAndEndsTheCut) {
  PushHold hold(0);
  Log log;
  ASSERT_TRUE(hold.Hold(5, Later()).ok());
  hold.Admit(5, log.Entry(5));
  hold.Admit(6, log.Entry(6));
  EXPECT_EQ(hold.Release(), 2);
  EXPECT_EQ(log.WaitFor(2), (std::vector<int>{5, 6}));
  const absl::Status s = hold.BeginSnapshot(5);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_NE(s.message().find("released"), absl::string_view::npos) << s;
  EXPECT_EQ(hold.BeginSnapshot(7).code(), absl::StatusCode::kAborted);  // never held
  EXPECT_EQ(hold.Release(), 0);
}

TEST(PushHoldTest, DestructionRunsWhatIsHeld) {
  Log log;
  {
    PushHold hold(0);
    ASSERT_TRUE(hold.Hold(1, Later()).ok());
    hold.Admit(1, log.Entry(1));
    hold.Admit(2, log.Entry(2));
  }
  EXPECT_EQ(log.Now(), (std::vector<int>{1, 2}));
}

}  // namespace
}  // namespace shardps
