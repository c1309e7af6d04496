// ShardStore's durable state: Snapshot and SnapshotStatus (files written off the serving
// threads from copy-on-write references) and Restore (by rows, into any partitioning).
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "common/error_detail.h"
#include "common/test_files.h"
#include "gtest/gtest.h"
#include "math/optimizer.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

namespace fs = std::filesystem;

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
  const std::string dir = FreshTestDir("snapshot");
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
  const std::string dir = FreshTestDir("boundaries");
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

absl::Status Hold(ShardStore& store, int64_t from_step, int64_t timeout_ms = 60000,
                  int64_t generation = 0) {
  HoldPushesRequest request;
  request.set_generation(generation);
  request.set_from_step(from_step);
  request.set_timeout_ms(timeout_ms);
  HoldPushesResponse response;
  return store.HoldPushes(request, &response);
}

// A push of job step `step` through the store's admission, as the ps's service sends it.
// `done` is notified with its status whenever it is applied.
void AdmitPush(ShardStore& store, const std::string& shard, uint64_t id,
               const std::vector<float>& grad, int64_t step, absl::Status* status,
               absl::Notification* done) {
  auto request = std::make_shared<PushRequest>();
  request->set_request_id(id);
  request->set_shard(shard);
  request->set_data(Bytes(grad));
  request->set_step(step);
  store.AdmitPush(step, [&store, request, status, done] {
    PushResponse response;
    *status = store.Push(*request, &response);
    done->Notify();
  });
}

// A cut under a hold: the snapshot has the shard as it was before the held step's push,
// which is applied once the snapshot has its references.
TEST(ShardStoreCheckpointTest, AHeldPushIsAppliedAfterTheSnapshotAndNotInIt) {
  const std::string dir = FreshTestDir("held");
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Part("a", 2, 2, 0, 1, 0, 2)}).ok());
  const std::vector<float> before = PullAll(*store, "a");
  ASSERT_TRUE(Hold(*store, 7).ok());
  absl::Status below_status, held_status;
  absl::Notification below, held;
  AdmitPush(*store, "a", 1, std::vector<float>(4, 1.0f), 6, &below_status, &below);
  ASSERT_TRUE(below.HasBeenNotified());  // below the barrier: applied at once
  ASSERT_TRUE(below_status.ok()) << below_status;
  const std::vector<float> at_cut = PullAll(*store, "a");
  EXPECT_NE(at_cut, before);
  AdmitPush(*store, "a", 2, std::vector<float>(4, 1.0f), 7, &held_status, &held);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(held.HasBeenNotified());
  int64_t version = 0;
  EXPECT_EQ(PullAll(*store, "a", &version), at_cut);
  EXPECT_EQ(version, 1);

  SnapshotRequest request;
  request.set_checkpoint_id(1);
  request.set_path(dir + "/cut.safetensors");
  request.set_held_from_step(7);
  SnapshotResponse response;
  ASSERT_TRUE(store->Snapshot(request, &response).ok());
  EXPECT_EQ(response.shards(0).version(), 1);
  held.WaitForNotificationWithTimeout(absl::Seconds(10));
  ASSERT_TRUE(held.HasBeenNotified());
  EXPECT_TRUE(held_status.ok()) << held_status;
  EXPECT_EQ(WaitForSnapshot(*store, 1).state(), SnapshotStatusResponse::DONE);
  auto file = SafetensorsFile::Open(dir + "/cut.safetensors");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(ReadTensor(**file, "a"), at_cut);
  PullAll(*store, "a", &version);
  EXPECT_EQ(version, 2);
  // The hold is over: a second snapshot under it is refused, and pushes run at once.
  request.set_checkpoint_id(2);
  request.set_path(dir + "/again.safetensors");
  EXPECT_EQ(store->Snapshot(request, &response).code(), absl::StatusCode::kAborted);
}

TEST(ShardStoreCheckpointTest, AHoldEndsOnARollbackOrItsTimeoutAndItsSnapshotIsThenRefused) {
  const std::string dir = FreshTestDir("hold_end");
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Part("a", 2, 2, 0, 1, 0, 2)}).ok());
  EXPECT_EQ(Hold(*store, -2).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Hold(*store, 3, 0).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Hold(*store, 3, 1000, 5).code(), absl::StatusCode::kFailedPrecondition);
  SnapshotRequest request;
  request.set_checkpoint_id(1);
  request.set_path(dir + "/none.safetensors");
  request.set_held_from_step(3);
  SnapshotResponse response;
  EXPECT_EQ(store->Snapshot(request, &response).code(), absl::StatusCode::kAborted);

  // A rollback (the generation rises) ends the hold; its push then fails as stale.
  ASSERT_TRUE(Hold(*store, 3).ok());
  absl::Status status;
  absl::Notification done;
  auto push = std::make_shared<PushRequest>();
  push->set_request_id(1);
  push->set_shard("a");
  push->set_data(Bytes(std::vector<float>(4, 1.0f)));
  push->set_generation(1);  // the timeline the rollback leaves
  store->AdmitPush(3, [&] {
    PushResponse r;
    status = store->Push(*push, &r);
    done.Notify();
  });
  SetGenerationRequest set;
  set.set_generation(2);
  SetGenerationResponse set_response;
  ASSERT_TRUE(store->SetGeneration(set, &set_response).ok());
  done.WaitForNotificationWithTimeout(absl::Seconds(10));
  EXPECT_TRUE(done.HasBeenNotified());
  EXPECT_EQ(status.code(), absl::StatusCode::kAborted) << status;
  EXPECT_EQ(DetailKind(status), ErrorDetail::STALE_GENERATION);
  request.set_generation(2);
  EXPECT_EQ(store->Snapshot(request, &response).code(), absl::StatusCode::kAborted);

  // A hold whose chief went away ends at its timeout.
  ASSERT_TRUE(Hold(*store, 5, 50, 2).ok());
  absl::Status late_status;
  absl::Notification late;
  AdmitPush(*store, "a", 9, std::vector<float>(4, 1.0f), 5, &late_status, &late);
  late.WaitForNotificationWithTimeout(absl::Seconds(10));
  EXPECT_TRUE(late.HasBeenNotified());
  request.set_held_from_step(5);
  const absl::Status expired = store->Snapshot(request, &response);
  EXPECT_EQ(expired.code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(absl::StrContains(expired.message(), "deadline")) << expired;
  EXPECT_FALSE(fs::exists(dir + "/none.safetensors"));
}

TEST(ShardStoreCheckpointTest, AnUnwritableDirectoryFailsTheSnapshotAndLeavesNoFile) {
  const std::string dir = FreshTestDir("unwritable");
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

// --- Restore.

// Variables created on a set of stores (ps tasks), split by FixedShards and placed round
// robin by the partitioners library, as the chief does.
struct Variable {
  std::string name;
  std::vector<int64_t> shape;
  OptimizerSpec optimizer = AdamSpec();
  bool sync = false;
};

struct Cluster {
  std::vector<std::unique_ptr<ShardStore>> stores;
  std::vector<std::pair<ShardSpec, int>> shards;  // spec and ps task, in row order per variable
};

Cluster MakeCluster(int num_ps, int num_shards, const std::vector<Variable>& variables) {
  Cluster cluster;
  for (int t = 0; t < num_ps; ++t) {
    ShardStore::Options options;
    options.task_index = t;
    cluster.stores.push_back(NewStore(options));
  }
  auto partitioner = NewFixedShardsPartitioner(num_shards);
  EXPECT_TRUE(partitioner.ok());
  auto placer = NewRoundRobinPlacer(num_ps);
  EXPECT_TRUE(placer.ok());
  std::vector<std::vector<ShardSpec>> per_ps(static_cast<size_t>(num_ps));
  for (const Variable& v : variables) {
    auto n = (*partitioner)->NumShards(v.shape, DataType::kFloat32);
    EXPECT_TRUE(n.ok());
    auto slices = SliceVariable(v.name, v.shape, *n);
    EXPECT_TRUE(slices.ok()) << slices.status();
    for (const ShardSlice& slice : *slices) {
      ShardSpec spec;
      spec.set_name(slice.name);
      spec.set_variable(v.name);
      spec.set_part(slice.part);
      spec.set_num_parts(slice.num_parts);
      spec.set_row_offset(slice.row_offset);
      for (int64_t d : slice.shape) spec.mutable_shape()->add_dim(d);
      for (int64_t d : v.shape) spec.mutable_full_shape()->add_dim(d);
      spec.mutable_initializer()->set_type(InitializerSpec::RANDOM_NORMAL);
      spec.mutable_initializer()->set_seed(3);
      *spec.mutable_optimizer() = v.optimizer;
      if (v.sync) {
        spec.mutable_update()->set_mode(UpdateSpec::SYNC);
        spec.mutable_update()->set_num_replicas(1);
      }
      int64_t elements = 1;
      for (int64_t d : slice.shape) elements *= d;
      const int ps = (*placer)->Place(elements * 4);
      per_ps[static_cast<size_t>(ps)].push_back(spec);
      cluster.shards.emplace_back(spec, ps);
    }
  }
  for (int t = 0; t < num_ps; ++t) {
    EXPECT_TRUE(Create(*cluster.stores[static_cast<size_t>(t)], per_ps[static_cast<size_t>(t)]).ok());
  }
  return cluster;
}

// A variable's parameters, whole, pulled shard by shard.
std::vector<float> PullVariable(Cluster& cluster, const std::string& variable) {
  std::vector<float> all;
  for (const auto& [spec, ps] : cluster.shards) {
    if (spec.variable() != variable) continue;
    const std::vector<float> part = PullAll(*cluster.stores[static_cast<size_t>(ps)], spec.name());
    all.insert(all.end(), part.begin(), part.end());
  }
  return all;
}

std::vector<std::string> SlotNames(const OptimizerSpec& spec) {
  auto optimizer = Optimizer::Create(spec);
  EXPECT_TRUE(optimizer.ok());
  std::vector<std::string> names;
  for (int s = 0; s < (*optimizer)->num_slots(); ++s) {
    names.emplace_back((*optimizer)->slot_name(s));
  }
  return names;
}

// Snapshots every store of `cluster` into `dir` and writes the manifest as the chief would;
// returns the manifest's path.
std::string WriteCheckpoint(Cluster& cluster, const std::string& dir, int64_t id,
                            int64_t generation = 0) {
  fs::create_directories(dir);
  Manifest manifest;
  manifest.checkpoint_id = id;
  manifest.job_id = "test-job";
  manifest.generation = generation;
  manifest.job_json = "{}";
  std::map<std::string, int64_t> versions;
  const int num_ps = static_cast<int>(cluster.stores.size());
  std::vector<std::string> files;
  for (int t = 0; t < num_ps; ++t) {
    const std::string file = "ps-" + std::to_string(t) + "-of-" + std::to_string(num_ps) +
                             ".safetensors";
    files.push_back(file);
    auto response = TakeSnapshot(*cluster.stores[static_cast<size_t>(t)], id, dir + "/" + file,
                                 generation);
    EXPECT_TRUE(response.ok()) << response.status();
    if (!response.ok()) return "";
    for (const ShardInfo& info : response->shards()) versions[info.spec().name()] = info.version();
  }
  for (int t = 0; t < num_ps; ++t) {
    const SnapshotStatusResponse status = WaitForSnapshot(*cluster.stores[static_cast<size_t>(t)], id);
    EXPECT_EQ(status.state(), SnapshotStatusResponse::DONE) << status.error();
    manifest.files.push_back(status.file());
  }
  for (const auto& [spec, ps] : cluster.shards) {
    ManifestVariable* variable = nullptr;
    for (ManifestVariable& v : manifest.variables) {
      if (v.name == spec.variable()) variable = &v;
    }
    if (variable == nullptr) {
      manifest.variables.emplace_back();
      variable = &manifest.variables.back();
      variable->name = spec.variable();
      variable->shape.assign(spec.full_shape().dim().begin(), spec.full_shape().dim().end());
      variable->partitioner = "fixed_shards:" + std::to_string(spec.num_parts());
      variable->slots = SlotNames(spec.optimizer());
      variable->optimizer = spec.optimizer();
      variable->initializer = spec.initializer();
      variable->update = spec.update();
    }
    ManifestShard shard;
    shard.name = spec.name();
    shard.part = spec.part();
    shard.num_parts = spec.num_parts();
    shard.row_offset = spec.row_offset();
    shard.rows = spec.shape().dim_size() == 0 ? 1 : spec.shape().dim(0);
    shard.ps = ps;
    shard.version = versions[spec.name()];
    shard.file = files[static_cast<size_t>(ps)];
    shard.tensors[""] = spec.name();
    for (const std::string& slot : variable->slots) shard.tensors[slot] = spec.name() + "/" + slot;
    variable->shards.push_back(shard);
  }
  const std::string path = dir + "/manifest.json";
  std::ofstream(path) << ManifestToJson(manifest);
  return path;
}

absl::Status Restore(ShardStore& store, const std::string& manifest, int64_t generation,
                     RestoreResponse* response = nullptr,
                     const std::map<std::string, std::string>& variable_map = {},
                     bool params_only = false) {
  RestoreRequest request;
  request.set_manifest(manifest);
  request.set_generation(generation);
  for (const auto& [from, to] : variable_map) (*request.mutable_variable_map())[from] = to;
  request.set_params_only(params_only);
  RestoreResponse ignored;
  return store.Restore(request, response != nullptr ? response : &ignored);
}

// Every variable and slot of a checkpoint, whole, as its reader gathers them.
std::map<std::string, std::vector<float>> ReadCheckpoint(const std::string& manifest) {
  std::map<std::string, std::vector<float>> tensors;
  auto reader = CheckpointReader::Open(manifest);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return tensors;
  for (const ManifestVariable& v : (*reader)->manifest().variables) {
    int64_t elements = 1;
    for (int64_t d : v.shape) elements *= d;
    const int64_t rows = v.shape.empty() ? 1 : v.shape[0];
    std::vector<std::string> slots = {""};
    slots.insert(slots.end(), v.slots.begin(), v.slots.end());
    for (const std::string& slot : slots) {
      std::vector<float> values(static_cast<size_t>(elements));
      EXPECT_TRUE((*reader)->ReadRows(v.name, slot, 0, rows, absl::MakeSpan(values)).ok());
      tensors[slot.empty() ? v.name : v.name + "/" + slot] = std::move(values);
    }
  }
  return tensors;
}

std::map<std::string, int64_t> Versions(Cluster& cluster) {
  std::map<std::string, int64_t> versions;
  for (const auto& [spec, ps] : cluster.shards) {
    ListShardsResponse listed;
    ListShardsRequest request;
    request.set_variable(spec.variable());
    EXPECT_TRUE(cluster.stores[static_cast<size_t>(ps)]->ListShards(request, &listed).ok());
    for (const ShardInfo& info : listed.shards()) versions[info.spec().name()] = info.version();
  }
  return versions;
}

// Trains a little: dense pushes to every shard, extra row pushes to the first shard of
// "emb" (so that its shards' versions differ), a step of every SYNC shard.
void Train(Cluster& cluster, uint64_t* id, int steps) {
  for (int step = 0; step < steps; ++step) {
    for (const auto& [spec, ps] : cluster.shards) {
      ShardStore& store = *cluster.stores[static_cast<size_t>(ps)];
      int64_t elements = 1;
      for (int64_t d : spec.shape().dim()) elements *= d;
      std::vector<float> grad(static_cast<size_t>(elements));
      for (size_t i = 0; i < grad.size(); ++i) {
        grad[i] = 0.01f * static_cast<float>((i * 7 + static_cast<size_t>(*id)) % 13) - 0.06f;
      }
      int64_t version = 0;
      PullAll(store, spec.name(), &version);
      ASSERT_TRUE(Push(store, spec.name(), ++*id, grad, version, 0).ok());
      if (spec.variable() == "emb" && spec.part() == 0) {
        PushRowsRequest rows;
        rows.set_request_id(++*id);
        rows.set_shard(spec.name());
        rows.add_ids(1);
        rows.set_data(Bytes(std::vector<float>(static_cast<size_t>(spec.shape().dim(1)), 0.5f)));
        PushRowsResponse response;
        ASSERT_TRUE(store.PushRows(rows, &response).ok());
      }
    }
  }
}

const std::vector<Variable> kVariables = {
    {"emb", {12, 4}}, {"dense/kernel", {6, 3}}, {"dense/bias", {6}, OptimizerSpec(), true}};

std::vector<Variable> Variables() {
  std::vector<Variable> v = kVariables;
  v[2].optimizer.set_type(OptimizerSpec::MOMENTUM);
  v[2].optimizer.set_learning_rate(0.1);
  v[2].optimizer.set_momentum(0.9);
  return v;
}

TEST(ShardStoreRestoreTest, RestoresBitIdenticallyIntoTheSameLayout) {
  const std::string dir = FreshTestDir("same_layout");
  Cluster cluster = MakeCluster(2, 2, Variables());
  uint64_t id = 0;
  Train(cluster, &id, 3);
  const std::string manifest = WriteCheckpoint(cluster, dir + "/ckpt-1", 1);
  ASSERT_FALSE(manifest.empty());
  const auto saved = ReadCheckpoint(manifest);
  const auto saved_versions = Versions(cluster);
  EXPECT_NE(saved_versions.at("emb/part_0"), saved_versions.at("emb/part_1"));
  const std::vector<float> emb = PullVariable(cluster, "emb");

  Train(cluster, &id, 2);  // moves on
  EXPECT_NE(PullVariable(cluster, "emb"), emb);
  for (auto& store : cluster.stores) {
    RestoreResponse response;
    ASSERT_TRUE(Restore(*store, manifest, 2, &response).ok());
    EXPECT_GT(response.bytes_read(), 0);
    EXPECT_GT(response.shards_size(), 0);
  }
  EXPECT_EQ(PullVariable(cluster, "emb"), emb);
  EXPECT_EQ(Versions(cluster), saved_versions);
  // Slots too: a checkpoint of the restored cluster holds the same bytes.
  const std::string again = WriteCheckpoint(cluster, dir + "/ckpt-2", 2, 2);
  EXPECT_EQ(ReadCheckpoint(again), saved);
  // And training resumes exactly as it would have from the checkpoint.
  HealthResponse health;
  cluster.stores[0]->Health(&health);
  EXPECT_EQ(health.generation(), 2);
}

TEST(ShardStoreRestoreTest, RestoresIntoAnotherPartitioning) {
  const std::string dir = FreshTestDir("reshard");
  Cluster two = MakeCluster(2, 2, Variables());
  uint64_t id = 0;
  Train(two, &id, 3);
  const std::string manifest = WriteCheckpoint(two, dir + "/from-2", 1);
  ASSERT_FALSE(manifest.empty());
  const auto saved = ReadCheckpoint(manifest);
  const auto two_versions = Versions(two);

  Cluster three = MakeCluster(3, 3, Variables());
  for (auto& store : three.stores) ASSERT_TRUE(Restore(*store, manifest, 1).ok());
  for (const Variable& v : Variables()) {
    EXPECT_EQ(PullVariable(three, v.name), PullVariable(two, v.name)) << v.name;
  }
  const std::string again = WriteCheckpoint(three, dir + "/from-3", 2, 1);
  EXPECT_EQ(ReadCheckpoint(again), saved);  // parameters and every slot, bit for bit
  // emb has 12 rows: 6 + 6 before, 4 + 4 + 4 now. The middle shard spans both old shards
  // and takes the higher version.
  const auto versions = Versions(three);
  EXPECT_EQ(versions.at("emb/part_0"), two_versions.at("emb/part_0"));
  EXPECT_EQ(versions.at("emb/part_1"),
            std::max(two_versions.at("emb/part_0"), two_versions.at("emb/part_1")));
  EXPECT_EQ(versions.at("emb/part_2"), two_versions.at("emb/part_1"));
}

// Flips one bit of tensor `name`'s data in the safetensors file at `path`.
void CorruptTensor(const std::string& path, const std::string& name) {
  auto file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorInfo* tensor = (*file)->Find(name);
  ASSERT_NE(tensor, nullptr) << name;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  unsigned char length[8];
  f.read(reinterpret_cast<char*>(length), 8);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | length[i];
  const std::streamoff at = static_cast<std::streamoff>(8 + header) + tensor->data_begin() + 5;
  char c = 0;
  f.seekg(at);
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(at);
  f.write(&c, 1);
}

TEST(ShardStoreRestoreTest, ACorruptFileIsDataLossNamingItAndChangesNothingInTheShard) {
  const std::string dir = FreshTestDir("corrupt");
  Cluster cluster = MakeCluster(1, 2, Variables());
  uint64_t id = 0;
  Train(cluster, &id, 1);
  const std::string manifest = WriteCheckpoint(cluster, dir + "/ckpt", 1);
  ASSERT_FALSE(manifest.empty());
  Train(cluster, &id, 1);
  ShardStore& store = *cluster.stores[0];
  const std::vector<float> before = PullAll(store, "emb/part_1");
  const auto versions = Versions(cluster);
  // The shard's slots before, as a snapshot writes them.
  auto slots_of_shard = [&](int64_t snapshot_id) {
    const std::string path = dir + "/slots-" + std::to_string(snapshot_id) + ".safetensors";
    EXPECT_TRUE(TakeSnapshot(store, snapshot_id, path, snapshot_id > 10 ? 2 : 0).ok());
    EXPECT_EQ(WaitForSnapshot(store, snapshot_id).state(), SnapshotStatusResponse::DONE);
    auto file = SafetensorsFile::Open(path);
    EXPECT_TRUE(file.ok());
    return std::make_pair(ReadTensor(**file, "emb/part_1/adam_m"),
                          ReadTensor(**file, "emb/part_1/adam_v"));
  };
  const auto slots_before = slots_of_shard(10);
  CorruptTensor(dir + "/ckpt/ps-0-of-1.safetensors", "emb/part_1/adam_m");

  for (bool only_that_shard : {true, false}) {
    RestoreRequest request;
    request.set_manifest(manifest);
    request.set_generation(2);
    if (only_that_shard) request.add_shards("emb/part_1");
    RestoreResponse response;
    const absl::Status status = store.Restore(request, &response);
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "ps-0-of-1.safetensors")) << status;
    EXPECT_TRUE(absl::StrContains(status.message(), "'emb/part_1'")) << status;
    const auto detail = GetDetail(status);
    ASSERT_TRUE(detail.has_value()) << status;
    EXPECT_EQ(detail->kind(), ErrorDetail::CHECKPOINT_CORRUPT);
    EXPECT_TRUE(absl::StrContains(detail->file(), "ps-0-of-1.safetensors")) << detail->file();
    // The shard whose tensor failed is as it was: parameters, version, slots (below).
    int64_t version = -1;
    EXPECT_EQ(PullAll(store, "emb/part_1", &version), before);
    EXPECT_EQ(version, versions.at("emb/part_1"));
    if (only_that_shard) {
      EXPECT_EQ(Versions(cluster), versions);  // nothing else was asked for, nothing changed
    }
  }
  EXPECT_EQ(slots_of_shard(11), slots_before);
  HealthResponse health;
  store.Health(&health);
  EXPECT_EQ(health.generation(), 2);  // raised first, whatever came after
}

TEST(ShardStoreRestoreTest, MismatchesAreFailedPreconditionNamingBoth) {
  const std::string dir = FreshTestDir("mismatch");
  Cluster cluster = MakeCluster(1, 1, Variables());
  const std::string manifest = WriteCheckpoint(cluster, dir + "/ckpt", 1);
  ASSERT_FALSE(manifest.empty());
  struct Case {
    std::string label;
    ShardSpec spec;
    std::vector<std::string> needles;
  };
  ShardSpec missing = Part("other", 12, 4, 0, 1, 0, 12);
  ShardSpec shape = Part("emb", 12, 5, 0, 1, 0, 12);
  shape.set_name("emb2");
  OptimizerSpec momentum;
  momentum.set_type(OptimizerSpec::MOMENTUM);
  momentum.set_learning_rate(0.1);
  ShardSpec optimizer = Part("emb", 12, 4, 0, 1, 0, 12, momentum);
  optimizer.set_name("emb3");
  const std::vector<Case> cases = {
      {"missing variable", missing, {"'other'", "manifest.json"}},
      {"shape", shape, {"[12, 5]", "[12, 4]", "'emb'"}},
      {"slots", optimizer, {"'momentum'", "adam_m", "'emb'"}},
  };
  for (const Case& c : cases) {
    auto store = NewStore();
    ASSERT_TRUE(Create(*store, {c.spec}).ok());
    const std::vector<float> before = PullAll(*store, c.spec.name());
    const absl::Status status = Restore(*store, manifest, 1);
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << c.label << ": " << status;
    for (const std::string& needle : c.needles) {
      EXPECT_TRUE(absl::StrContains(status.message(), needle))
          << c.label << ": '" << needle << "' not in " << status;
    }
    EXPECT_EQ(PullAll(*store, c.spec.name()), before) << c.label;
  }
  // Restoring a shard the ps does not hold: NOT_FOUND.
  RestoreRequest request;
  request.set_manifest(manifest);
  request.add_shards("nope");
  RestoreResponse response;
  EXPECT_EQ(cluster.stores[0]->Restore(request, &response).code(), absl::StatusCode::kNotFound);
}

TEST(ShardStoreRestoreTest, AnEmptyManifestReinitializesAtVersionZero) {
  Cluster cluster = MakeCluster(1, 2, Variables());
  Cluster fresh = MakeCluster(1, 2, Variables());
  uint64_t id = 0;
  Train(cluster, &id, 2);
  ASSERT_TRUE(Restore(*cluster.stores[0], "", 3).ok());
  for (const Variable& v : Variables()) {
    EXPECT_EQ(PullVariable(cluster, v.name), PullVariable(fresh, v.name)) << v.name;
  }
  for (const auto& [name, version] : Versions(cluster)) EXPECT_EQ(version, 0) << name;
  // Slots are back at their initial values: the same training gives the same result.
  uint64_t id1 = 100, id2 = 100;
  Train(cluster, &id1, 2);
  Train(fresh, &id2, 2);
  for (const Variable& v : Variables()) {
    EXPECT_EQ(PullVariable(cluster, v.name), PullVariable(fresh, v.name)) << v.name;
  }
}

TEST(ShardStoreRestoreTest, WarmStartWithANameMapAndParamsOnly) {
  const std::string dir = FreshTestDir("warm");
  Cluster cluster = MakeCluster(1, 2, Variables());
  uint64_t id = 0;
  Train(cluster, &id, 2);
  const std::string manifest = WriteCheckpoint(cluster, dir + "/ckpt", 1);
  ASSERT_FALSE(manifest.empty());
  const std::vector<float> emb = PullVariable(cluster, "emb");

  // A new job: "tower/emb" starts from the old "emb" (parameters only, another optimizer),
  // "head" is not in the map and keeps its initial values.
  OptimizerSpec sgd;
  sgd.set_type(OptimizerSpec::SGD);
  sgd.set_learning_rate(0.5);
  std::vector<Variable> variables = {{"tower/emb", {12, 4}, sgd}, {"head", {4, 2}, sgd}};
  Cluster job = MakeCluster(1, 3, variables);
  Cluster untouched = MakeCluster(1, 3, variables);
  RestoreResponse response;
  ASSERT_TRUE(Restore(*job.stores[0], manifest, 1, &response, {{"tower/emb", "emb"}}, true).ok());
  EXPECT_EQ(response.shards_size(), 3);  // tower/emb's three shards; head skipped
  EXPECT_EQ(PullVariable(job, "tower/emb"), emb);
  EXPECT_EQ(PullVariable(job, "head"), PullVariable(untouched, "head"));
  for (const auto& [name, version] : Versions(job)) EXPECT_EQ(version, 0) << name;

  // Adam's slots start over with params_only: the next update equals one from a fresh
  // shard holding the same parameters.
  Cluster adam = MakeCluster(1, 1, Variables());
  ASSERT_TRUE(Restore(*adam.stores[0], manifest, 1, nullptr, {{"emb", "emb"}}, true).ok());
  Cluster reference = MakeCluster(1, 1, Variables());
  AssignRequest assign;
  assign.set_request_id(1);
  assign.set_shard("emb");
  assign.set_data(Bytes(emb));
  AssignResponse assigned;
  ASSERT_TRUE(reference.stores[0]->Assign(assign, &assigned).ok());
  const std::vector<float> grad(48, 0.25f);
  ASSERT_TRUE(Push(*adam.stores[0], "emb", 7, grad).ok());
  ASSERT_TRUE(Push(*reference.stores[0], "emb", 7, grad).ok());
  EXPECT_EQ(PullAll(*adam.stores[0], "emb"), PullAll(*reference.stores[0], "emb"));
}

TEST(ShardStoreRestoreTest, RestoreStartsAfreshAndFailsThePullsOfTheOldTimeline) {
  const std::string dir = FreshTestDir("afresh");
  Cluster cluster = MakeCluster(1, 1, Variables());
  uint64_t id = 0;
  Train(cluster, &id, 3);  // emb at version 6 (dense and rows pushes)
  const std::string manifest = WriteCheckpoint(cluster, dir + "/ckpt", 1);
  ASSERT_FALSE(manifest.empty());
  ASSERT_TRUE(Restore(*cluster.stores[0], "", 1).ok());  // back to version 0
  ShardStore& store = *cluster.stores[0];
  // A request id applied before a restore is not a duplicate after it.
  ASSERT_TRUE(Push(store, "emb", 500, std::vector<float>(48, 1.0f)).ok());
  // A pull waits for version 6. The rollback to generation 2 leaves its timeline: it fails
  // at once (ABORTED, STALE_GENERATION) instead of holding its step until the new timeline
  // reaches version 6 or the wait times out.
  PullRequest wait;
  wait.set_shard("emb");
  wait.set_min_version(6);
  PullResponse waited;
  absl::Status waited_status = absl::UnknownError("waiting");
  store.Pull(wait, &waited, [&](const absl::Status& s) { waited_status = s; });
  EXPECT_EQ(waited_status.code(), absl::StatusCode::kUnknown);
  ASSERT_TRUE(Restore(store, manifest, 2).ok());
  EXPECT_EQ(waited_status.code(), absl::StatusCode::kAborted) << waited_status;
  EXPECT_EQ(DetailKind(waited_status), ErrorDetail::STALE_GENERATION);
  // A pull of the new timeline sees the restored version.
  PullResponse now;
  absl::Status now_status = absl::UnknownError("waiting");
  store.Pull(wait, &now, [&](const absl::Status& s) { now_status = s; });
  EXPECT_TRUE(now_status.ok()) << now_status;
  EXPECT_EQ(now.version(), 6);
  PushRequest again;
  again.set_request_id(500);
  again.set_shard("emb");
  again.set_data(Bytes(std::vector<float>(48, 1.0f)));
  PushResponse response;
  ASSERT_TRUE(store.Push(again, &response).ok());
  EXPECT_FALSE(response.duplicate());
  EXPECT_EQ(response.version(), 7);
  // A restore from an older generation is refused.
  const absl::Status stale = Restore(store, manifest, 1);
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(DetailKind(stale), ErrorDetail::STALE_GENERATION);
}

// Pushes of generation 1 race a Restore to generation 2: each push either lands before the
// shard is replaced (and is overwritten) or is refused; none lands on the restored state.
TEST(ShardStoreRestoreTest, APushRacingARestoreNeverLandsOnTheRestoredState) {
  const std::string dir = FreshTestDir("race");
  Cluster cluster = MakeCluster(1, 1, {{"w", {64, 64}}});
  ShardStore& store = *cluster.stores[0];
  SetGenerationRequest set;
  set.set_generation(1);
  SetGenerationResponse set_response;
  ASSERT_TRUE(store.SetGeneration(set, &set_response).ok());
  const std::string manifest = WriteCheckpoint(cluster, dir + "/ckpt", 1, 1);
  ASSERT_FALSE(manifest.empty());
  const std::vector<float> saved = PullAll(store, "w");
  for (int round = 0; round < 20; ++round) {
    std::atomic<bool> stop{false};
    std::atomic<int> refused{0};
    std::thread pusher([&] {
      uint64_t id = 1000000 * static_cast<uint64_t>(round + 1);
      while (!stop.load()) {
        PushRequest request;
        request.set_request_id(++id);
        request.set_shard("w");
        request.set_generation(1 + round);
        request.set_data(Bytes(std::vector<float>(64 * 64, 1.0f)));
        PushResponse response;
        const absl::Status s = store.Push(request, &response);
        if (!s.ok()) {
          EXPECT_EQ(DetailKind(s), ErrorDetail::STALE_GENERATION) << s;
          ++refused;
          if (refused.load() > 3) break;
        }
      }
    });
    ASSERT_TRUE(Restore(store, manifest, 2 + round).ok());
    // Every push from now on is refused; the state is exactly the checkpoint's.
    while (refused.load() == 0) std::this_thread::yield();
    stop = true;
    pusher.join();
    int64_t version = -1;
    EXPECT_EQ(PullAll(store, "w", &version), saved) << "round " << round;
    EXPECT_EQ(version, 0) << "round " << round;
  }
}

}  // namespace
}  // namespace shardps
