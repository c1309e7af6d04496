#include "ps_server/generation_fence.h"

#include <functional>
#include <memory>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

class GenerationFenceTest : public ::testing::Test {
 protected:
  GenerationFenceTest() {
    EXPECT_TRUE(shards_.InsertNew({MakeTestShard(DenseTestSpec("w", 2, 2))}, [](int64_t) {}).ok());
    shard_ = *shards_.Find("w", "test");
  }

  absl::Status CheckUpdate(int64_t generation) {
    absl::MutexLock lock(&shard_->mu());
    return fence_.CheckUpdate(*shard_, generation, "push to shard 'w'");
  }

  ShardMap shards_{/*task_index=*/2};
  std::shared_ptr<Shard> shard_;
  PullWaits waits_{&shards_};
  GenerationFence fence_{/*task_index=*/2, /*incarnation=*/77, &shards_, &waits_};
};

TEST_F(GenerationFenceTest, OnlyRises) {
  EXPECT_EQ(fence_.current(), 0);
  EXPECT_EQ(fence_.Raise(3), 3);
  EXPECT_EQ(fence_.Raise(1), 3);
  EXPECT_EQ(fence_.current(), 3);
}

TEST_F(GenerationFenceTest, UpdatesOfAnotherGenerationAreRefused) {
  fence_.Raise(3);
  EXPECT_TRUE(CheckUpdate(0).ok());  // unfenced
  EXPECT_TRUE(CheckUpdate(3).ok());
  const absl::Status stale = CheckUpdate(2);
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(stale.message(),
            "push to shard 'w': it belongs to generation 2 but ps task 2 is at generation 3 "
            "(rolled back since); nothing was changed");
  const auto detail = GetDetail(stale);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::STALE_GENERATION);
  EXPECT_EQ(detail->ps_incarnation(), 77u);
  EXPECT_EQ(detail->generation(), 3);
  const absl::Status ahead = CheckUpdate(4);
  EXPECT_EQ(ahead.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(ahead.message(), "set the generation first")) << ahead;
  {
    absl::MutexLock lock(&shard_->mu());
    shard_->MarkDropped();
  }
  EXPECT_EQ(CheckUpdate(3).code(), absl::StatusCode::kNotFound);
}

TEST_F(GenerationFenceTest, SnapshotsBelongToTheGenerationExactly) {
  fence_.Raise(1);
  EXPECT_TRUE(fence_.CheckSnapshot(1, "snapshot 5").ok());
  EXPECT_EQ(fence_.CheckSnapshot(0, "snapshot 5").code(), absl::StatusCode::kAborted);
  EXPECT_EQ(fence_.CheckSnapshot(2, "snapshot 5").code(), absl::StatusCode::kFailedPrecondition);
}

// A request of a generation this ps never reached (it restarted, or missed the move) finds a
// ps without the job's state, and says so in its detail, as a ps missing the shard does.
TEST_F(GenerationFenceTest, AnUpdateOrSnapshotAheadOfThePsFindsItsStateLost) {
  fence_.Raise(1);
  const absl::Status update = CheckUpdate(3);
  EXPECT_EQ(update.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(update.message(),
            "push to shard 'w': it belongs to generation 3, ahead of ps task 2's generation 1; "
            "set the generation first");
  const absl::Status snapshot = fence_.CheckSnapshot(2, "snapshot 5");
  EXPECT_EQ(snapshot.code(), absl::StatusCode::kFailedPrecondition);
  for (const absl::Status& ahead : {update, snapshot}) {
    const auto detail = GetDetail(ahead);
    ASSERT_TRUE(detail.has_value()) << ahead;
    EXPECT_EQ(detail->kind(), ErrorDetail::PS_STATE_LOST) << ahead;
    EXPECT_EQ(detail->ps_task(), 2);
    EXPECT_EQ(detail->ps_incarnation(), 77u);
    EXPECT_EQ(detail->generation(), 1);
  }
}

TEST_F(GenerationFenceTest, RaisingFailsThePullsWaiting) {
  absl::Status status;
  bool finished = false;
  PullWaits::DoneCallback done = [&](const absl::Status& s) {
    status = s;
    finished = true;
  };
  bool pending = false;
  auto fill = [] { return absl::OkStatus(); };
  ASSERT_TRUE(waits_
                  .FillOrWait(
                      shard_, 1, 0, fill,
                      [fill]() -> std::function<absl::Status()> { return fill; }, &done, &pending)
                  .ok());
  ASSERT_TRUE(pending);
  fence_.Raise(0);  // not a rise: the pull still waits
  EXPECT_FALSE(finished);
  fence_.Raise(1);
  ASSERT_TRUE(finished);
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(DetailKind(status), ErrorDetail::STALE_GENERATION);
  EXPECT_TRUE(
      absl::StrContains(status.message(), "pull from shard 'w': it belongs to generation 0"))
      << status;
}

}  // namespace
}  // namespace shardps
