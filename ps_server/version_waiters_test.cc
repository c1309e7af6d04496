#include "ps_server/version_waiters.h"

#include <atomic>
#include <memory>
#include <new>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

// A waiter that counts its fills and records its completion.
struct Probe {
  int fills = 0;
  int done_calls = 0;
  absl::Status status = absl::UnknownError("not done");
};

WaiterPtr MakeWaiter(int64_t min_version, Probe* probe) {
  auto w = std::make_shared<VersionWaiter>();
  w->min_version = min_version;
  w->fill = [probe] {
    ++probe->fills;
    return absl::OkStatus();
  };
  w->done = [probe](const absl::Status& s) {
    ++probe->done_calls;
    probe->status = s;
  };
  return w;
}

TEST(VersionWaitersTest, TakeReadyReleasesExactlyTheWaitersAtOrBelowTheVersion) {
  VersionWaiters waiters;
  Probe p1, p2, p3;
  waiters.Add(MakeWaiter(1, &p1));
  waiters.Add(MakeWaiter(3, &p3));
  waiters.Add(MakeWaiter(2, &p2));
  std::vector<WaiterPtr> ready;
  waiters.TakeReady(2, &ready);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(p1.fills, 1);
  EXPECT_EQ(p2.fills, 1);
  EXPECT_EQ(p3.fills, 0);
  for (const WaiterPtr& w : ready) w->Finish(absl::OkStatus());
  EXPECT_EQ(p1.done_calls, 1);
  EXPECT_TRUE(p2.status.ok());
  EXPECT_FALSE(waiters.empty());
  ready.clear();
  waiters.TakeReady(5, &ready);
  EXPECT_EQ(ready.size(), 1u);
  EXPECT_TRUE(waiters.empty());
}

TEST(VersionWaitersTest, AClaimedWaiterIsNotTakenAgain) {
  VersionWaiters waiters;
  Probe a, b;
  WaiterPtr claimed = MakeWaiter(1, &a);
  waiters.Add(claimed);
  waiters.Add(MakeWaiter(1, &b));
  ASSERT_TRUE(claimed->Claim());  // the timer won this one
  WaiterPtr taken = waiters.TakeFirst();
  ASSERT_NE(taken, nullptr);
  EXPECT_EQ(waiters.TakeFirst(), nullptr);
  EXPECT_TRUE(waiters.empty());
  taken->Finish(absl::CancelledError("shutting down"));
  EXPECT_EQ(b.status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(a.done_calls, 0);
}

TEST(VersionWaitersTest, AFillOutOfMemoryFinishesTheWaiterWithResourceExhausted) {
  VersionWaiters waiters;
  Probe p;
  WaiterPtr w = MakeWaiter(1, &p);
  w->fill = []() -> absl::Status { throw std::bad_alloc(); };
  waiters.Add(w);
  waiters.Add(MakeWaiter(2, &p));
  EXPECT_EQ(waiters.CountReady(1), 1u);
  EXPECT_EQ(waiters.CountReady(2), 2u);
  std::vector<WaiterPtr> ready;
  waiters.TakeReady(1, &ready);
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0]->fill_status.code(), absl::StatusCode::kResourceExhausted);
  ready[0]->Finish(ready[0]->fill_status);
  EXPECT_EQ(p.status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(waiters.CountReady(1), 0u);
}

TEST(VersionWaitersTest, RemoveIsANoOpForAWaiterNoLongerListed) {
  VersionWaiters waiters;
  Probe p;
  WaiterPtr w = MakeWaiter(4, &p);
  waiters.Add(w);
  waiters.Remove(*w);
  EXPECT_TRUE(waiters.empty());
  waiters.Remove(*w);
  std::vector<WaiterPtr> ready;
  waiters.TakeReady(10, &ready);
  EXPECT_TRUE(ready.empty());
}

TEST(WaiterTimerTest, ExpiresWaitersPastTheirDeadlineOnly) {
  WaiterTimer timer;
  Probe expiring, removed;
  absl::Notification expired;
  WaiterPtr w = MakeWaiter(1, &expiring);
  w->on_timeout = [&](VersionWaiter& waiter) {
    waiter.Finish(absl::DeadlineExceededError("too late"));
    expired.Notify();
  };
  WaiterPtr keep = MakeWaiter(1, &removed);
  std::atomic<int> keep_timeouts{0};
  keep->on_timeout = [&](VersionWaiter&) { ++keep_timeouts; };
  timer.Add(keep, absl::Now() + absl::Hours(1));
  timer.Remove(*keep);  // completed by an update first
  timer.Add(w, absl::Now() + absl::Milliseconds(1));
  expired.WaitForNotification();
  EXPECT_EQ(expiring.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(expiring.done_calls, 1);
  EXPECT_FALSE(w->Claim());  // the timer claimed it
  EXPECT_EQ(keep_timeouts.load(), 0);
}

TEST(WaiterTimerTest, AWaiterClaimedElsewhereIsNotExpired) {
  Probe p;
  std::atomic<int> timeouts{0};
  {
    WaiterTimer timer;
    WaiterPtr w = MakeWaiter(1, &p);
    w->on_timeout = [&](VersionWaiter&) { ++timeouts; };
    ASSERT_TRUE(w->Claim());  // an update won the race but has not removed it yet
    timer.Add(w, absl::Now());
    // A later waiter is expired only after the earlier one was handled.
    absl::Notification later_expired;
    Probe q;
    WaiterPtr later = MakeWaiter(1, &q);
    later->on_timeout = [&](VersionWaiter&) { later_expired.Notify(); };
    timer.Add(later, absl::Now() + absl::Milliseconds(1));
    later_expired.WaitForNotification();
  }
  EXPECT_EQ(timeouts.load(), 0);
}

}  // namespace
}  // namespace shardps
