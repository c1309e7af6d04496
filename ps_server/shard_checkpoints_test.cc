#include "ps_server/shard_checkpoints.h"

#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/error_detail.h"
#include "common/test_files.h"
#include "gtest/gtest.h"
#include "ps_server/shard_testing.h"

namespace shardps {
namespace {

class ShardCheckpointsTest : public ::testing::Test {
 protected:
  ShardCheckpointsTest() {
    EXPECT_TRUE(shards_
                    .InsertNew({MakeTestShard(DenseTestSpec("w", 3, 2, OptimizerSpec::ADAGRAD)),
                                MakeTestShard(DynamicTestSpec("t", 2))},
                               [](int64_t) {})
                    .ok());
  }

  SnapshotStatusResponse WaitForSnapshot(int64_t id) {
    SnapshotStatusRequest request;
    request.set_checkpoint_id(id);
    SnapshotStatusResponse response;
    for (int i = 0; i < 3000; ++i) {
      EXPECT_TRUE(checkpoints_.SnapshotStatus(request, &response).ok());
      if (response.state() != SnapshotStatusResponse::WRITING) break;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return response;
  }

  void SetVersion(const std::string& name, int64_t version) {
    std::shared_ptr<Shard> shard = *shards_.Find(name, "test");
    absl::MutexLock lock(&shard->mu());
    shard->ReplaceState(shard->NewState(), version);
  }

  ShardMap shards_{/*task_index=*/4};
  PullWaits waits_{&shards_};
  GenerationFence fence_{4, 9, &shards_, &waits_};
  ShardCheckpoints checkpoints_{4, &shards_, &fence_, &waits_, SnapshotWriter::Options()};
};

TEST_F(ShardCheckpointsTest, ASnapshotCutsEveryShardAndWritesItsFile) {
  SetVersion("w", 5);
  SnapshotRequest request;
  request.set_checkpoint_id(7);
  request.set_path(MakeTestDir("snapshot") + "/ps-4.safetensors");
  SnapshotResponse response;
  ASSERT_TRUE(checkpoints_.Snapshot(request, &response).ok());
  ASSERT_EQ(response.shards_size(), 2);
  EXPECT_EQ(response.shards(0).spec().name(), "t");
  EXPECT_EQ(response.shards(1).spec().name(), "w");
  EXPECT_EQ(response.shards(1).version(), 5);
  const SnapshotStatusResponse status = WaitForSnapshot(7);
  EXPECT_EQ(status.state(), SnapshotStatusResponse::DONE) << status.DebugString();
  EXPECT_TRUE(PathExists(request.path()));
}

TEST_F(ShardCheckpointsTest, ASnapshotOfAnotherGenerationOrWithoutAPathIsRefused) {
  SnapshotRequest request;
  request.set_checkpoint_id(1);
  SnapshotResponse response;
  EXPECT_EQ(checkpoints_.Snapshot(request, &response).message(), "snapshot 1: path is empty");
  request.set_path(MakeTestDir("snapshot") + "/ps-4.safetensors");
  request.set_generation(1);
  EXPECT_EQ(checkpoints_.Snapshot(request, &response).code(),
            absl::StatusCode::kFailedPrecondition);
  fence_.Raise(2);
  EXPECT_EQ(DetailKind(checkpoints_.Snapshot(request, &response)), ErrorDetail::STALE_GENERATION);
}

// With a data root, a snapshot or restore path outside it is refused before anything is cut,
// written or replaced.
TEST_F(ShardCheckpointsTest, PathsOutsideTheDataRootAreRefused) {
  const std::string base = MakeTestDir("data_root");
  ASSERT_EQ(::mkdir((base + "/root").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((base + "/outside").c_str(), 0755), 0);
  ASSERT_EQ(::symlink((base + "/outside").c_str(), (base + "/root/link").c_str()), 0);
  ShardCheckpoints confined{4, &shards_, &fence_, &waits_, SnapshotWriter::Options(),
                            *DataRoot::Open(base + "/root", "data_root")};
  SetVersion("w", 5);
  for (const std::string& bad : {base + "/outside/ps-4.safetensors",
                                 base + "/root/../outside/ps-4.safetensors",
                                 base + "/root/link/ps-4.safetensors", std::string("/tmp/x")}) {
    SnapshotRequest request;
    request.set_checkpoint_id(3);
    request.set_path(bad);
    SnapshotResponse response;
    absl::Status status = confined.Snapshot(request, &response);
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << bad << ": " << status;
    RestoreRequest restore;
    restore.set_manifest(bad);
    RestoreResponse restored;
    status = confined.Restore(restore, &restored);
    EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied) << bad << ": " << status;
  }
  EXPECT_FALSE(PathExists(base + "/outside/ps-4.safetensors"));
  SnapshotStatusRequest id;
  id.set_checkpoint_id(3);
  SnapshotStatusResponse state;
  ASSERT_TRUE(confined.SnapshotStatus(id, &state).ok());
  EXPECT_EQ(state.state(), SnapshotStatusResponse::UNKNOWN);
  {
    std::shared_ptr<Shard> w = *shards_.Find("w", "test");
    absl::MutexLock lock(&w->mu());
    EXPECT_EQ(w->version(), 5);  // no restore replaced it
  }
  // Inside the root: written.
  SnapshotRequest good;
  good.set_checkpoint_id(4);
  good.set_path(base + "/root/ps-4.safetensors");
  SnapshotResponse response;
  ASSERT_TRUE(confined.Snapshot(good, &response).ok());
}

TEST_F(ShardCheckpointsTest, ARestoreWithoutACheckpointReturnsToTheInitialState) {
  SetVersion("w", 5);
  RestoreRequest request;
  request.set_generation(3);
  request.add_shards("w");
  RestoreResponse response;
  ASSERT_TRUE(checkpoints_.Restore(request, &response).ok());
  EXPECT_EQ(fence_.current(), 3);
  ASSERT_EQ(response.shards_size(), 1);
  EXPECT_EQ(response.shards(0).version(), 0);
  std::shared_ptr<Shard> shard = *shards_.Find("w", "test");
  std::vector<float> values(6);
  {
    absl::MutexLock lock(&shard->mu());
    EXPECT_EQ(shard->version(), 0);
    shard->CopyRange({0, 3}, values.data());
  }
  EXPECT_EQ(values, std::vector<float>(6, 1.0f));
  // A restore of an older generation, or of a shard not here, changes nothing.
  request.set_generation(2);
  EXPECT_EQ(DetailKind(checkpoints_.Restore(request, &response)), ErrorDetail::STALE_GENERATION);
  request.set_generation(3);
  request.add_shards("nope");
  EXPECT_EQ(checkpoints_.Restore(request, &response).message(),
            "restore shard 'nope': no such shard on ps task 4");
}

}  // namespace
}  // namespace shardps
