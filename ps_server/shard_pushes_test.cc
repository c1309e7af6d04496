#include "ps_server/shard_pushes.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

class ShardPushesTest : public ::testing::Test {
 protected:
  ShardPushesTest() {
    EXPECT_TRUE(shards_
                    .InsertNew({MakeTestShard(DenseTestSpec("w", 2, 2)),
                                MakeTestShard(DenseTestSpec("s", 2, 1, OptimizerSpec::SGD, 2))},
                               [](int64_t) {})
                    .ok());
  }

  std::vector<float> Values(const std::string& name) {
    std::shared_ptr<Shard> shard = *shards_.Find(name, "test");
    std::vector<float> out(static_cast<size_t>(shard->size()));
    absl::MutexLock lock(&shard->mu());
    shard->CopyRange({0, shard->rows()}, out.data());
    return out;
  }

  int64_t Version(const std::string& name) {
    std::shared_ptr<Shard> shard = *shards_.Find(name, "test");
    absl::MutexLock lock(&shard->mu());
    return shard->version();
  }

  ShardMap shards_{/*task_index=*/0};
  PullWaits waits_{&shards_};
  GenerationFence fence_{0, 1, &shards_, &waits_};
  ParallelFor parallel_{0};
  ShardPushes pushes_{&shards_, &fence_, &waits_, &parallel_};
};

TEST_F(ShardPushesTest, AppliesAPushOnceAndAnswersItsRetryAsADuplicate) {
  PushRequest request;
  request.set_shard("w");
  request.set_request_id(9);
  request.set_row_begin(1);
  const std::string grad = Bytes({2, 4});
  PushResponse response;
  ASSERT_TRUE(pushes_.Push(request, grad, &response).ok());
  EXPECT_TRUE(response.applied());
  EXPECT_EQ(response.version(), 1);
  EXPECT_EQ(Values("w"), (std::vector<float>{1, 1, 0, -1}));  // SGD, learning rate 0.5
  ASSERT_TRUE(pushes_.Push(request, grad, &response).ok());
  EXPECT_TRUE(response.duplicate());
  EXPECT_EQ(Values("w"), (std::vector<float>{1, 1, 0, -1}));
}

TEST_F(ShardPushesTest, RefusalsChangeNothing) {
  PushRequest request;
  request.set_shard("w");
  request.set_request_id(1);
  PushResponse response;
  EXPECT_TRUE(absl::StrContains(pushes_.Push(request, Bytes({1}), &response).message(),
                                "push to shard 'w': data has 4 bytes, expected 16"));
  fence_.Raise(2);
  request.set_generation(1);
  const absl::Status stale = pushes_.Push(request, Bytes({1, 1, 1, 1}), &response);
  EXPECT_EQ(DetailKind(stale), ErrorDetail::STALE_GENERATION);
  EXPECT_EQ(Values("w"), std::vector<float>(4, 1));
  EXPECT_EQ(Version("w"), 0);
}

TEST_F(ShardPushesTest, RowPushesSumDuplicateIds) {
  PushRowsRequest request;
  request.set_shard("w");
  request.set_request_id(3);
  for (int64_t id : {0, 0}) request.add_ids(id);
  request.set_data(Bytes({1, 2, 3, 4}));
  PushRowsResponse response;
  ASSERT_TRUE(pushes_.PushRows(request, &response).ok());
  EXPECT_EQ(Values("w"), (std::vector<float>{-1, -2, 1, 1}));
}

TEST_F(ShardPushesTest, ASyncStepAppliesOnceEveryReplicaPushed) {
  for (int replica : {1, 0}) {
    PushRequest request;
    request.set_shard("s");
    request.set_request_id(10 + replica);
    request.mutable_sync()->set_step(0);
    request.mutable_sync()->set_replica(replica);
    PushResponse response;
    ASSERT_TRUE(pushes_.Push(request, Bytes({1, 2}), &response).ok());
    EXPECT_EQ(response.applied(), replica == 0);
  }
  EXPECT_EQ(Values("s"), (std::vector<float>{0, -1}));
  EXPECT_EQ(Version("s"), 1);
}

TEST_F(ShardPushesTest, BatchesAndAssigns) {
  PushBatchRequest batch;
  for (int64_t row : {0, 1}) {
    PushRequest* item = batch.add_pushes();
    item->set_shard("w");
    item->set_request_id(20 + row);
    item->set_row_begin(row);
    item->set_row_end(row + 1);
    batch.add_data_bytes(8);
  }
  const std::string data = Bytes({2, 2, 4, 4});
  const absl::string_view pieces[] = {absl::string_view(data).substr(0, 5),
                                      absl::string_view(data).substr(5)};
  PushBatchResponse batch_response;
  ASSERT_TRUE(pushes_.PushBatch(batch, pieces, &batch_response).ok());
  EXPECT_EQ(batch_response.pushes_size(), 2);
  EXPECT_EQ(Values("w"), (std::vector<float>{0, 0, -1, -1}));

  AssignRequest assign;
  assign.set_shard("w");
  assign.set_request_id(30);
  assign.set_data(Bytes({5, 6, 7, 8}));
  AssignResponse assigned;
  ASSERT_TRUE(pushes_.Assign(assign, &assigned).ok());
  EXPECT_EQ(Values("w"), (std::vector<float>{5, 6, 7, 8}));
  EXPECT_EQ(Version("w"), 2);  // an assign does not count as an update
}

}  // namespace
}  // namespace shardps
