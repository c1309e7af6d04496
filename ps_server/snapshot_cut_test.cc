#include "ps_server/snapshot_cut.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

std::vector<std::string> Names(const SnapshotWriter::Job& job) {
  std::vector<std::string> names;
  for (const TensorToWrite& t : job.tensors) names.push_back(t.name);
  return names;
}

TEST(SnapshotCutTest, ADenseShardIsItsParametersAndSlots) {
  std::shared_ptr<Shard> shard = MakeTestShard(DenseTestSpec("w", 3, 2, OptimizerSpec::ADAM));
  Shard::Snapshot snapshot;
  {
    absl::MutexLock lock(&shard->mu());
    snapshot = shard->TakeSnapshot();
  }
  SnapshotWriter::Job job;
  ShardInfo info;
  AddDenseCut(*shard, std::move(snapshot), &job, &info);
  EXPECT_EQ(Names(job), (std::vector<std::string>{"w", "w/adam_m", "w/adam_v"}));
  for (const TensorToWrite& t : job.tensors) {
    EXPECT_EQ(t.shape, (std::vector<int64_t>{3, 2}));
    size_t bytes = 0;
    for (absl::string_view piece : t.pieces) bytes += piece.size();
    EXPECT_EQ(bytes, 3 * 2 * sizeof(float));
  }
  EXPECT_EQ(info.spec().name(), "w");
  EXPECT_EQ(info.version(), 0);
  EXPECT_EQ(info.bytes(), shard->bytes());
}

TEST(SnapshotCutTest, ADynamicShardIsItsKeysRowsSlotsStepsAndDeletions) {
  std::shared_ptr<Shard> shard = MakeTestShard(DynamicTestSpec("t", 4));
  Shard::DynamicCut cut;
  {
    absl::MutexLock lock(&shard->mu());
    const std::vector<int64_t> keys = {11, 12};
    const std::vector<float> grad(8, 1.0f);
    ASSERT_TRUE(shard->ApplyKeys(keys, grad.data()).ok());
    cut = shard->TakeDynamicCut(/*checkpoint_id=*/5, /*base=*/0);
  }
  SnapshotWriter::Job job;
  ShardInfo info;
  AddDynamicCut(*shard, std::move(cut), &job, &info);
  EXPECT_EQ(Names(job), (std::vector<std::string>{"t/keys", "t", "t/accumulator", "t/last_steps",
                                                  "t/deleted_keys"}));
  EXPECT_EQ(job.tensors[0].dtype, "I64");
  EXPECT_EQ(job.tensors[0].shape, (std::vector<int64_t>{2}));
  EXPECT_EQ(job.tensors[1].shape, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(job.tensors[3].dtype, "U32");
  EXPECT_EQ(job.tensors[4].shape, (std::vector<int64_t>{0}));
  EXPECT_EQ(info.dynamic().rows(), 2);
  EXPECT_EQ(info.base_checkpoint(), 0);
  EXPECT_EQ(info.version(), 1);
}

}  // namespace
}  // namespace shardps
