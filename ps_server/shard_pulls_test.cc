#include "ps_server/shard_pulls.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

std::vector<float> Floats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), bytes.size());
  return out;
}

class ShardPullsTest : public ::testing::Test {
 protected:
  ShardPullsTest() {
    EXPECT_TRUE(shards_.InsertNew({MakeTestShard(DenseTestSpec("w", 4, 2))}, [](int64_t) {}).ok());
  }

  // Runs a pull that completes at once.
  absl::Status PullNow(const PullRequest& request, PullResponse* response) {
    absl::Status result = absl::UnknownError("done not called");
    pulls_.Pull(request, response, nullptr, [&](const absl::Status& s) { result = s; });
    return result;
  }

  ShardMap shards_{/*task_index=*/1};
  PullWaits waits_{&shards_};
  // Replies up to 3 rows of 2 floats.
  ShardPulls pulls_{&shards_, &waits_, /*task_index=*/1, /*max_reply_bytes=*/24};
};

TEST_F(ShardPullsTest, PullsARangeWithItsVersionAndShape) {
  PullRequest request;
  request.set_shard("w");
  request.set_row_begin(1);
  request.set_row_end(3);
  PullResponse response;
  ASSERT_TRUE(PullNow(request, &response).ok());
  EXPECT_EQ(Floats(response.data()), std::vector<float>(4, 1.0f));
  EXPECT_EQ(response.version(), 0);
  ASSERT_EQ(response.shape().dim_size(), 2);
  EXPECT_EQ(response.shape().dim(0), 2);
  EXPECT_EQ(response.shape().dim(1), 2);
}

TEST_F(ShardPullsTest, SharesTheBlocksInPlace) {
  PullRequest request;
  request.set_shard("w");
  PullResponse response;
  PulledBytes in_place;
  request.set_row_end(3);
  absl::Status result = absl::UnknownError("done not called");
  pulls_.Pull(request, &response, &in_place, [&](const absl::Status& s) { result = s; });
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_TRUE(response.data().empty());
  size_t bytes = 0;
  for (absl::string_view piece : in_place.pieces) bytes += piece.size();
  EXPECT_EQ(bytes, 3 * 2 * sizeof(float));
  EXPECT_FALSE(in_place.holds.empty());
}

TEST_F(ShardPullsTest, RepliesPastTheLimitFailBeforeAnythingIsPulled) {
  PullRequest request;
  request.set_shard("w");
  PullResponse response;
  const absl::Status s = PullNow(request, &response);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(DetailKind(s), ErrorDetail::LIMIT);
  EXPECT_TRUE(absl::StrContains(s.message(),
                                "the reply would be 32 bytes, more than ps task 1's "
                                "--max_reply_bytes=24"))
      << s;

  // Two items of 2 rows each: 32 bytes together, though each fits alone.
  PullBatchRequest batch;
  for (int i = 0; i < 2; ++i) {
    PullRequest* item = batch.add_pulls();
    item->set_shard("w");
    item->set_row_end(2);
  }
  std::vector<PullResponse> responses;
  std::vector<PulledBytes> in_place;
  absl::Status result = absl::UnknownError("done not called");
  pulls_.PullBatch(batch, &responses, &in_place, [&](const absl::Status& s) { result = s; });
  EXPECT_TRUE(absl::StrContains(result.message(),
                                "pull batch (2 items): the reply would be at "
                                "least 32 bytes"))
      << result;
  EXPECT_TRUE(responses.empty());
}

TEST_F(ShardPullsTest, RowsByIdAndUnknownShards) {
  PullRowsRequest request;
  request.set_shard("w");
  request.add_ids(3);
  request.add_ids(0);
  PullRowsResponse response;
  absl::Status result = absl::UnknownError("done not called");
  pulls_.PullRows(request, &response, [&](const absl::Status& s) { result = s; });
  ASSERT_TRUE(result.ok()) << result;
  EXPECT_EQ(Floats(response.data()), std::vector<float>(4, 1.0f));

  request.set_shard("nope");
  pulls_.PullRows(request, &response, [&](const absl::Status& s) { result = s; });
  EXPECT_EQ(result.message(), "pull rows from shard 'nope': no such shard on ps task 1");
}

TEST_F(ShardPullsTest, APullForALaterVersionWaits) {
  PullRequest request;
  request.set_shard("w");
  request.set_row_end(1);
  request.set_min_version(1);
  PullResponse response;
  bool finished = false;
  pulls_.Pull(request, &response, nullptr, [&](const absl::Status& s) {
    EXPECT_TRUE(s.ok()) << s;
    finished = true;
  });
  EXPECT_FALSE(finished);
  std::shared_ptr<Shard> shard = *shards_.Find("w", "test");
  std::vector<WaiterPtr> ready;
  {
    absl::MutexLock lock(&shard->mu());
    shard->ReplaceState(shard->NewState(), 1);
    shard->waiters().TakeReady(shard->version(), &ready);
  }
  waits_.CompleteReady(&ready);
  EXPECT_TRUE(finished);
  EXPECT_EQ(response.version(), 1);
  EXPECT_EQ(response.data().size(), 2 * sizeof(float));
}

}  // namespace
}  // namespace shardps
