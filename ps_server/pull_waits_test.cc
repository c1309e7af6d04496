#include "ps_server/pull_waits.h"

#include <functional>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

// One pull's outcome, as its `done` reports it.
struct Outcome {
  absl::Notification done;
  absl::Status status;
  PullWaits::DoneCallback Callback() {
    return [this](const absl::Status& s) {
      status = s;
      done.Notify();
    };
  }
};

class PullWaitsTest : public ::testing::Test {
 protected:
  PullWaitsTest() {
    EXPECT_TRUE(shards_.InsertNew({MakeTestShard(DenseTestSpec("w", 2, 2))}, [](int64_t) {}).ok());
    shard_ = *shards_.Find("w", "test");
  }

  // Registers a pull for `min_version` whose fill counts its calls; returns FillOrWait's
  // status and whether the pull waits.
  absl::Status Start(int64_t min_version, int64_t timeout_ms, Outcome* outcome, bool* pending) {
    PullWaits::DoneCallback done = outcome->Callback();
    auto fill = [this]() {
      ++fills_;
      return absl::OkStatus();
    };
    return waits_.FillOrWait(
        shard_, min_version, timeout_ms, fill,
        [fill]() -> std::function<absl::Status()> { return fill; }, &done, pending);
  }

  // Advances the shard to `version` and completes the pulls it releases.
  void Advance(int64_t version) {
    std::vector<WaiterPtr> ready;
    {
      absl::MutexLock lock(&shard_->mu());
      shard_->ReplaceState(shard_->NewState(), version);
      shard_->waiters().TakeReady(shard_->version(), &ready);
    }
    waits_.CompleteReady(&ready);
  }

  ShardMap shards_{/*task_index=*/1};
  std::shared_ptr<Shard> shard_;
  int fills_ = 0;
  PullWaits waits_{&shards_};
};

TEST_F(PullWaitsTest, FillsAtOnceWhenTheVersionIsThere) {
  Outcome outcome;
  bool pending = false;
  EXPECT_TRUE(Start(0, 0, &outcome, &pending).ok());
  EXPECT_FALSE(pending);
  EXPECT_EQ(fills_, 1);
}

TEST_F(PullWaitsTest, WaitsUntilAnUpdateReachesTheVersion) {
  Outcome outcome;
  bool pending = false;
  ASSERT_TRUE(Start(2, 0, &outcome, &pending).ok());
  EXPECT_TRUE(pending);
  Advance(1);
  EXPECT_FALSE(outcome.done.HasBeenNotified());
  Advance(2);
  ASSERT_TRUE(outcome.done.HasBeenNotified());
  EXPECT_TRUE(outcome.status.ok()) << outcome.status;
  EXPECT_EQ(fills_, 1);
}

TEST_F(PullWaitsTest, TimesOutNamingTheVersions) {
  Outcome outcome;
  bool pending = false;
  ASSERT_TRUE(Start(3, 20, &outcome, &pending).ok());
  ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(outcome.status.message(),
            "pull from shard 'w': version 0 did not reach min_version 3 within 20 ms");
  EXPECT_EQ(fills_, 0);
}

TEST_F(PullWaitsTest, FailWaitersAndShutdownEndEveryWait) {
  Outcome failed;
  bool pending = false;
  ASSERT_TRUE(Start(1, 0, &failed, &pending).ok());
  waits_.FailWaiters(*shard_, [] { return absl::AbortedError("left"); });
  ASSERT_TRUE(failed.done.HasBeenNotified());
  EXPECT_EQ(failed.status.code(), absl::StatusCode::kAborted);

  Outcome cancelled;
  ASSERT_TRUE(Start(1, 60000, &cancelled, &pending).ok());
  EXPECT_FALSE(waits_.shutting_down());
  waits_.Shutdown();
  EXPECT_TRUE(waits_.shutting_down());
  ASSERT_TRUE(cancelled.done.HasBeenNotified());
  EXPECT_EQ(cancelled.status.message(), "pull from shard 'w': the ps is shutting down");
  // Later pulls that would wait fail at once; one that need not wait is still answered.
  Outcome later;
  pending = false;
  EXPECT_EQ(Start(1, 0, &later, &pending).code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(pending);
  EXPECT_TRUE(Start(0, 0, &later, &pending).ok());
}

TEST_F(PullWaitsTest, ADroppedShardIsNotFound) {
  {
    absl::MutexLock lock(&shard_->mu());
    shard_->MarkDropped();
  }
  Outcome outcome;
  bool pending = false;
  const absl::Status s = Start(0, 0, &outcome, &pending);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "pull from shard 'w': no such shard on ps task 1");
}

}  // namespace
}  // namespace shardps
