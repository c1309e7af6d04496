// Dynamic tables through a checkpoint's whole path: ps snapshots (full, then
// increments on the previous checkpoint: only the rows changed and the keys evicted since),
// the chief's manifest (BuildManifest), a restore into another number of ps (another bucket
// split) that reads the chain down to the full checkpoint, pruning that keeps the chain, and
// a missing base named.
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/dynamic_rows.h"
#include "client/local_ps_interface.h"
#include "client/ps_client.h"
#include "common/test_files.h"
#include "coordinator/checkpointing.h"
#include "coordinator/job_spec.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

constexpr int kDim = 4;

struct Cluster {
  std::vector<std::unique_ptr<ShardStore>> stores;
  std::unique_ptr<PsClient> client;
};

Cluster MakeCluster(int num_ps) {
  Cluster c;
  std::vector<std::unique_ptr<PsInterface>> ps;
  for (int i = 0; i < num_ps; ++i) {
    ShardStore::Options options;
    options.task_index = i;
    c.stores.push_back(*ShardStore::Create(options));
    ps.push_back(NewLocalPsInterface(absl::StrCat("ps:", i), c.stores.back().get()));
  }
  c.client = *PsClient::Create(std::move(ps), {});
  return c;
}

VariableDef Table(int64_t max_rows) {
  VariableDef def;
  def.name = "j/emb";
  def.shape = {0, kDim};
  def.initializer.set_type(InitializerSpec::RANDOM_UNIFORM);
  def.initializer.set_seed(3);
  def.optimizer.set_type(OptimizerSpec::ADAGRAD);
  def.optimizer.set_learning_rate(0.1);
  def.dynamic = DynamicTableDef{};
  def.dynamic->num_buckets = 32;
  def.dynamic->max_rows = max_rows;
  return def;
}

// Snapshots every ps as checkpoint `id` (an increment on `since`), waits for the files and
// commits the manifest; returns each shard's ShardInfo.
std::vector<ShardInfo> Checkpoint(Cluster& c, const CheckpointDir& dir, int64_t id, int64_t since) {
  std::vector<ShardInfo> shards;
  const std::string path = *dir.Prepare(id);
  std::vector<std::string> files;
  for (int k = 0; k < c.client->num_ps(); ++k) {
    files.push_back(absl::StrCat(path, "/", CheckpointDir::DataFileName(k, c.client->num_ps())));
  }
  std::vector<SnapshotResponse> snapshots;
  const absl::Status snapped = c.client->SnapshotAll(id, files, 0, since, std::nullopt, &snapshots);
  EXPECT_TRUE(snapped.ok()) << snapped;
  std::vector<SnapshotStatusResponse> statuses;
  for (int tries = 0; tries < 500; ++tries) {
    EXPECT_TRUE(c.client->SnapshotStatusAll(id, &statuses).ok());
    bool done = true;
    for (const auto& s : statuses) done &= s.state() == SnapshotStatusResponse::DONE;
    if (done) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  CheckpointContents contents;
  contents.checkpoint_id = id;
  contents.job_id = "j-1";
  contents.job = *ParseJobSpec(R"({"name": "j", "model": "softmax"})", 1);
  contents.snapshots = snapshots;
  for (const auto& s : statuses) contents.files.push_back(s.file());
  contents.variables.push_back(*c.client->GetLayout("j/emb"));
  absl::StatusOr<Manifest> manifest = BuildManifest(contents, 1.0);
  EXPECT_TRUE(manifest.ok()) << manifest.status();
  EXPECT_TRUE(dir.Commit(*manifest).ok());
  for (const auto& r : snapshots) {
    for (const ShardInfo& info : r.shards()) shards.push_back(info);
  }
  return shards;
}

int64_t RowsOn(Cluster& c) {
  std::vector<HealthResponse> unused;
  int64_t rows = 0;
  for (auto& store : c.stores) {
    ListShardsResponse list;
    EXPECT_TRUE(store->ListShards({}, &list).ok());
    for (const ShardInfo& info : list.shards()) rows += info.dynamic().rows();
  }
  return rows;
}

std::vector<int64_t> Keys(int64_t first, int n) {
  std::vector<int64_t> keys;
  for (int i = 0; i < n; ++i) keys.push_back((first + i) * 0x9E3779B97F4A7C15LL);
  return keys;
}

void Push(Cluster& c, const std::vector<int64_t>& keys, float g) {
  std::vector<float> grads(keys.size() * kDim);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = g * static_cast<float>(1 + i % 5);
  const absl::Status s = c.client->PushRows("j/emb", keys, grads);
  ASSERT_TRUE(s.ok()) << s;
}

TEST(DynamicCheckpointTest, IncrementsRestoreIntoAnotherSplitAndPruningKeepsTheChain) {
  const std::string root = MakeTestDir("dynamic_ckpt");
  const CheckpointDir dir = *CheckpointDir::Open(root, /*create=*/true);
  Cluster a = MakeCluster(2);
  ASSERT_TRUE(a.client->CreateVariables({Table(/*max_rows=*/600)}, **NewFixedShardsPartitioner(1),
                                        (*NewRoundRobinPlacer(2)).get()).ok());
  std::set<int64_t> touched;
  auto push = [&](int64_t first, int n, float g) {
    const std::vector<int64_t> keys = Keys(first, n);
    touched.insert(keys.begin(), keys.end());
    Push(a, keys, g);
  };
  push(0, 300, 0.5f);
  std::vector<ShardInfo> c1 = Checkpoint(a, dir, 1, 0);
  int64_t written = 0;
  for (const ShardInfo& s : c1) {
    EXPECT_EQ(s.base_checkpoint(), 0) << "the first checkpoint is full";
    written += s.dynamic().rows();
  }
  EXPECT_EQ(written, 300);
  // 100 rows changed, 200 new; then 400 more new ones, past the 600-row budget: evictions.
  push(250, 300, -0.25f);
  std::vector<ShardInfo> c2 = Checkpoint(a, dir, 2, 1);
  written = 0;
  for (const ShardInfo& s : c2) {
    EXPECT_EQ(s.base_checkpoint(), 1);
    written += s.dynamic().rows();
  }
  EXPECT_EQ(written, 300) << "an increment holds the rows changed since, not all 550";
  push(1000, 400, 0.125f);
  Checkpoint(a, dir, 3, 2);
  const int64_t rows_at_cut = RowsOn(a);
  EXPECT_LT(rows_at_cut, 950) << "the budget evicted rows";
  const std::vector<int64_t> all(touched.begin(), touched.end());
  std::vector<float> expected(all.size() * kDim);
  ASSERT_TRUE(a.client->PullRows("j/emb", all, absl::MakeSpan(expected)).ok());
  push(5000, 10, 1.0f);  // after the cut: not in checkpoint 3

  // The chain read directly (as the evaluator's sidecar mode reads it): the rows at the cut,
  // evicted keys absent.
  {
    auto reader = CheckpointReader::Open(dir.CheckpointPath(3));
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::map<int64_t, std::vector<float>> rows;
    DynamicTableReadStats stats;
    const absl::Status read = ReadDynamicTable(
        (*reader)->manifest(), (*reader)->manifest_path(), "j/emb", {""},
        [](int64_t) { return true; },
        [&](const std::vector<int64_t>& keys) {
          for (int64_t key : keys) rows.erase(key);
          return absl::OkStatus();
        },
        [&](DynamicRowsPart& part) {
          for (size_t k = 0; k < part.keys.size(); ++k) {
            rows[part.keys[k]].assign(part.tensors[0].begin() + k * kDim,
                                      part.tensors[0].begin() + (k + 1) * kDim);
          }
          return absl::OkStatus();
        },
        &stats);
    ASSERT_TRUE(read.ok()) << read;
    EXPECT_EQ(static_cast<int64_t>(rows.size()), rows_at_cut);
    EXPECT_GE(stats.checkpoints, 3) << "3, then 2 and 1 beneath it";
    for (size_t k = 0; k < all.size(); ++k) {
      auto it = rows.find(all[k]);
      if (it == rows.end()) continue;
      EXPECT_EQ(it->second, std::vector<float>(expected.begin() + k * kDim,
                                               expected.begin() + (k + 1) * kDim));
    }
  }

  // Pruning to one checkpoint keeps 1 and 2: 3 is read on top of them.
  ASSERT_TRUE(dir.Prune(1, std::nullopt, 0).ok());
  ASSERT_EQ(dir.List()->size(), 3u);

  // Three ps: another split of the 32 buckets.
  Cluster b = MakeCluster(3);
  ASSERT_TRUE(b.client->CreateVariables({Table(600)}, **NewFixedShardsPartitioner(1),
                                        (*NewRoundRobinPlacer(3)).get()).ok());
  RestoreRequest restore;
  restore.set_manifest(dir.CheckpointPath(3) + "/manifest.json");
  std::vector<RestoreResponse> restored;
  const absl::Status r = b.client->RestoreAll(restore, &restored);
  ASSERT_TRUE(r.ok()) << r;
  EXPECT_EQ(RowsOn(b), rows_at_cut) << "evicted rows stay deleted";
  std::vector<float> got(all.size() * kDim);
  ASSERT_TRUE(b.client->PullRows("j/emb", all, absl::MakeSpan(got)).ok());
  EXPECT_EQ(got, expected) << "every row as it was at checkpoint 3's cut";
  // Slots came back too: the same push on both moves the same rows the same way.
  Cluster again = MakeCluster(2);
  ASSERT_TRUE(again.client->CreateVariables({Table(600)}, **NewFixedShardsPartitioner(1),
                                            (*NewRoundRobinPlacer(2)).get()).ok());
  ASSERT_TRUE(again.client->RestoreAll(restore, &restored).ok());
  Push(b, Keys(0, 50), 0.3f);
  Push(again, Keys(0, 50), 0.3f);
  std::vector<float> from_b(50 * kDim), from_again(50 * kDim);
  ASSERT_TRUE(b.client->PullRows("j/emb", Keys(0, 50), absl::MakeSpan(from_b)).ok());
  ASSERT_TRUE(again.client->PullRows("j/emb", Keys(0, 50), absl::MakeSpan(from_again)).ok());
  EXPECT_EQ(from_b, from_again);

  // Without its base, an increment cannot be read: the base is named.
  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir.CheckpointPath(2), "'").c_str()), 0);
  Cluster c = MakeCluster(2);
  ASSERT_TRUE(c.client->CreateVariables({Table(600)}, **NewFixedShardsPartitioner(1),
                                        (*NewRoundRobinPlacer(2)).get()).ok());
  const absl::Status missing = c.client->RestoreAll(restore, &restored);
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition) << missing;
  EXPECT_TRUE(absl::StrContains(missing.message(), "increment on checkpoint 2")) << missing;
}

}  // namespace
}  // namespace shardps
