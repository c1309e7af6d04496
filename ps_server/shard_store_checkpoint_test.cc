// ShardStore's durable state: Snapshot and SnapshotStatus (files written off the serving
// threads from copy-on-write references) and Restore (by rows, into any partitioning).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "checkpoint/safetensors.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "ps_server/optimizer.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

namespace fs = std::filesystem;

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

std::vector<float> Floats(absl::string_view s) {
  std::vector<float> v(s.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

OptimizerSpec AdamSpec() {
  OptimizerSpec o;
  o.set_type(OptimizerSpec::ADAM);
  o.set_learning_rate(0.01);
  return o;
}

// A shard `part` of `num_parts` of variable `variable` with full shape [rows, width], rows
// [row_offset, row_offset + shard_rows).
ShardSpec Part(const std::string& variable, int64_t rows, int64_t width, int part,
               int num_parts, int64_t row_offset, int64_t shard_rows,
               OptimizerSpec optimizer = AdamSpec()) {
  ShardSpec s;
  s.set_name(num_parts == 1 ? variable : variable + "/part_" + std::to_string(part));
  s.set_variable(variable);
  s.set_part(part);
  s.set_num_parts(num_parts);
  s.set_row_offset(row_offset);
  s.mutable_shape()->add_dim(shard_rows);
  s.mutable_shape()->add_dim(width);
  s.mutable_full_shape()->add_dim(rows);
  s.mutable_full_shape()->add_dim(width);
  s.mutable_initializer()->set_type(InitializerSpec::GLOROT_UNIFORM);
  s.mutable_initializer()->set_seed(11);
  *s.mutable_optimizer() = optimizer;
  return s;
}

std::unique_ptr<ShardStore> NewStore(ShardStore::Options options = {}) {
  auto store = ShardStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

absl::Status Create(ShardStore& store, const std::vector<ShardSpec>& specs) {
  CreateShardsRequest request;
  for (const ShardSpec& s : specs) *request.add_shards() = s;
  CreateShardsResponse response;
  return store.CreateShards(request, &response);
}

std::vector<float> PullAll(ShardStore& store, const std::string& shard,
                           int64_t* version = nullptr) {
  PullRequest request;
  request.set_shard(shard);
  PullResponse response;
  absl::Status status = absl::UnknownError("not called");
  store.Pull(request, &response, [&](const absl::Status& s) { status = s; });
  EXPECT_TRUE(status.ok()) << status;
  if (version != nullptr) *version = response.version();
  return Floats(response.data());
}

absl::Status Push(ShardStore& store, const std::string& shard, uint64_t id,
                  const std::vector<float>& grad, int64_t step = 0, int replica = 0) {
  PushRequest request;
  request.set_request_id(id);
  request.set_shard(shard);
  request.set_data(Bytes(grad));
  request.mutable_sync()->set_step(step);
  request.mutable_sync()->set_replica(replica);
  PushResponse response;
  return store.Push(request, &response);
}

absl::StatusOr<SnapshotResponse> TakeSnapshot(ShardStore& store, int64_t id,
                                              const std::string& path, int64_t generation = 0) {
  SnapshotRequest request;
  request.set_checkpoint_id(id);
  request.set_path(path);
  request.set_generation(generation);
  SnapshotResponse response;
  absl::Status status = store.Snapshot(request, &response);
  if (!status.ok()) return status;
  return response;
}

SnapshotStatusResponse WaitForSnapshot(ShardStore& store, int64_t id) {
  while (true) {
    SnapshotStatusRequest request;
    request.set_checkpoint_id(id);
    SnapshotStatusResponse response;
    EXPECT_TRUE(store.SnapshotStatus(request, &response).ok());
    if (response.state() != SnapshotStatusResponse::WRITING) return response;
    usleep(1000);
  }
}

std::vector<float> ReadTensor(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo* t = file.Find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::string bytes(static_cast<size_t>(t->data_end() - t->data_begin()), '\0');
  EXPECT_TRUE(file.ReadRange(*t, 0, static_cast<int64_t>(bytes.size()), &bytes[0]).ok());
  return Floats(bytes);
}

TEST(ShardStoreCheckpointTest, ASnapshotHoldsThePreUpdateBytesWhileTheShardMovesOn) {
  const std::string dir = TestDir("snapshot");
  absl::Notification writing, release;
  ShardStore::Options options;
  options.task_index = 1;
  options.before_snapshot_write = [&](int64_t) {
    writing.Notify();
    release.WaitForNotification();
  };
  auto store = NewStore(options);
  // 3 MiB of parameters: three blocks of 1 MiB (and as many per Adam slot).
  constexpr int64_t kRows = 3072, kWidth = 256;
  const ShardSpec spec = Part("emb", kRows, kWidth, 0, 1, 0, kRows);
  ASSERT_TRUE(Create(*store, {spec}).ok());
  std::vector<float> grad(kRows * kWidth);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = 0.001f * static_cast<float>(i % 97) - 0.04f;
  ASSERT_TRUE(Push(*store, "emb", 1, grad).ok());
  const std::vector<float> params_at_1 = PullAll(*store, "emb");

  auto snapshot = TakeSnapshot(*store, 5, dir + "/ps-1.safetensors");
  ASSERT_TRUE(snapshot.ok()) << snapshot.status();
  ASSERT_EQ(snapshot->shards_size(), 1);
  EXPECT_EQ(snapshot->shards(0).version(), 1);
  EXPECT_EQ(snapshot->shards(0).spec().name(), "emb");
  writing.WaitForNotification();
  SnapshotStatusRequest status_request;
  status_request.set_checkpoint_id(5);
  SnapshotStatusResponse status;
  ASSERT_TRUE(store->SnapshotStatus(status_request, &status).ok());
  EXPECT_EQ(status.state(), SnapshotStatusResponse::WRITING);
  // The same id cannot be taken again while it is written.
  EXPECT_EQ(TakeSnapshot(*store, 5, dir + "/again.safetensors").status().code(),
            absl::StatusCode::kFailedPrecondition);

  // Training goes on while the file is written: the updates copy the blocks they touch.
  ASSERT_TRUE(Push(*store, "emb", 2, grad).ok());
  ASSERT_TRUE(Push(*store, "emb", 3, grad).ok());
  int64_t version = 0;
  const std::vector<float> live = PullAll(*store, "emb", &version);
  EXPECT_EQ(version, 3);
  EXPECT_NE(live, params_at_1);
  HealthResponse health;
  store->Health(&health);
  // Every block of the parameters and of both slots was copied once: 9 MiB.
  EXPECT_EQ(health.snapshot_copy_bytes(), 3 * kRows * kWidth * 4);
  release.Notify();

  status = WaitForSnapshot(*store, 5);
  ASSERT_EQ(status.state(), SnapshotStatusResponse::DONE) << status.error();
  EXPECT_EQ(status.file().file(), "ps-1.safetensors");
  ASSERT_EQ(status.file().tensors_size(), 3);
  auto file = SafetensorsFile::Open(dir + "/ps-1.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->metadata().at("checkpoint_id"), "5");
  EXPECT_EQ((*file)->metadata().at("ps_task"), "1");
  const TensorInfo* params = (*file)->Find("emb");
  ASSERT_NE(params, nullptr);
  EXPECT_EQ(std::vector<int64_t>(params->shape().begin(), params->shape().end()),
            (std::vector<int64_t>{kRows, kWidth}));
  EXPECT_EQ(ReadTensor(**file, "emb"), params_at_1);

  // The slots as they were after the first update: Adam's m and v from one gradient.
  auto adam = Optimizer::Create(AdamSpec());
  ASSERT_TRUE(adam.ok());
  std::vector<float> p(grad.size(), 0.0f), m(grad.size(), 0.0f), v(grad.size(), 0.0f);
  float* slots[] = {m.data(), v.data()};
  (*adam)->ApplyDense(1, grad, p.data(), slots);
  EXPECT_EQ(ReadTensor(**file, "emb/adam_m"), m);
  EXPECT_EQ(ReadTensor(**file, "emb/adam_v"), v);
  // And the shard itself is unchanged by the write.
  EXPECT_EQ(PullAll(*store, "emb"), live);
}

TEST(ShardStoreCheckpointTest, SnapshotsAreTakenAtSyncStepBoundariesAndInTheirGeneration) {
  const std::string dir = TestDir("boundaries");
  auto store = NewStore();
  ShardSpec sync = Part("s", 4, 2, 0, 1, 0, 4);
  sync.mutable_update()->set_mode(UpdateSpec::SYNC);
  sync.mutable_update()->set_num_replicas(2);
  ASSERT_TRUE(Create(*store, {sync, Part("a", 2, 2, 0, 1, 0, 2)}).ok());
  ASSERT_TRUE(Push(*store, "s", 1, std::vector<float>(8, 1.0f), 0, 0).ok());
  const auto mid_step = TakeSnapshot(*store, 1, dir + "/mid.safetensors");
  EXPECT_EQ(mid_step.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(mid_step.status().message(), "'s'")) << mid_step.status();
  ASSERT_TRUE(Push(*store, "s", 2, std::vector<float>(8, 1.0f), 0, 1).ok());
  auto done = TakeSnapshot(*store, 1, dir + "/after.safetensors");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->shards_size(), 2);
  EXPECT_EQ(WaitForSnapshot(*store, 1).state(), SnapshotStatusResponse::DONE);
  EXPECT_FALSE(fs::exists(dir + "/mid.safetensors"));

  SetGenerationRequest set;
  set.set_generation(4);
  SetGenerationResponse set_response;
  ASSERT_TRUE(store->SetGeneration(set, &set_response).ok());
  const auto stale = TakeSnapshot(*store, 2, dir + "/stale.safetensors", 3);
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(DetailKind(stale.status()), ErrorDetail::STALE_GENERATION);
  EXPECT_EQ(TakeSnapshot(*store, 2, dir + "/ahead.safetensors", 5).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(TakeSnapshot(*store, 2, dir + "/ok.safetensors", 4).ok());
  EXPECT_EQ(WaitForSnapshot(*store, 2).state(), SnapshotStatusResponse::DONE);
  SnapshotStatusRequest unknown;
  unknown.set_checkpoint_id(99);
  SnapshotStatusResponse unknown_status;
  ASSERT_TRUE(store->SnapshotStatus(unknown, &unknown_status).ok());
  EXPECT_EQ(unknown_status.state(), SnapshotStatusResponse::UNKNOWN);
}

TEST(ShardStoreCheckpointTest, AnUnwritableDirectoryFailsTheSnapshotAndLeavesNoFile) {
  const std::string dir = TestDir("unwritable");
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Part("a", 2, 2, 0, 1, 0, 2)}).ok());
  const std::string path = dir + "/missing/ps-0.safetensors";
  ASSERT_TRUE(TakeSnapshot(*store, 3, path).ok());
  const SnapshotStatusResponse status = WaitForSnapshot(*store, 3);
  EXPECT_EQ(status.state(), SnapshotStatusResponse::FAILED);
  EXPECT_TRUE(absl::StrContains(status.error(), path)) << status.error();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

}  // namespace
}  // namespace shardps
