// Live bucket moves through PsClient against in-process ps tasks: rows and slots follow the
// buckets, clients routing by an old layout route again (pushes applied exactly once; a SYNC
// run's table bit-identical to an unmoved run's), refusals change nothing.
#include "client/bucket_mover.h"

#include <atomic>
#include <map>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "client/bucket_move_testing.h"
#include "client/local_ps_interface.h"
#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "partitioners/buckets.h"
#include "ps_server/shard_store.h"

namespace shardps {
bool operator==(const PlannedMove& a, const PlannedMove& b) {
  return a.from_shard == b.from_shard && a.to_shard == b.to_shard && a.count == b.count;
}

std::ostream& operator<<(std::ostream& os, const PlannedMove& m) {
  return os << m.count << " from shard " << m.from_shard << " to " << m.to_shard;
}

namespace {

constexpr int kBuckets = 64;
constexpr int64_t kDim = 4;

class Cluster {
 public:
  explicit Cluster(int num_ps) {
    for (int i = 0; i < num_ps; ++i) stores_.push_back(*ShardStore::Create({}));
  }
  // A client of its own, as each worker and the chief have (of the first `num_ps` ps; 0: all).
  std::unique_ptr<PsClient> Client(size_t num_ps = 0) {
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (size_t i = 0; i < (num_ps > 0 ? num_ps : stores_.size()); ++i) {
      ps.push_back(NewLocalPsInterface("ps:" + std::to_string(i), stores_[i].get()));
    }
    PsClient::Options options;
    options.max_chunk_bytes = 512;  // several requests per shard
    return *PsClient::Create(std::move(ps), options);
  }

 private:
  std::vector<std::unique_ptr<ShardStore>> stores_;
};

VariableDef Table(OptimizerSpec::Type optimizer, InitializerSpec::Type init, int replicas = 0) {
  VariableDef def;
  def.name = "emb";
  def.shape = {0, kDim};
  def.initializer.set_type(init);
  def.initializer.set_seed(5);
  def.optimizer.set_type(optimizer);
  def.optimizer.set_learning_rate(optimizer == OptimizerSpec::SGD ? 1.0 : 0.3);
  if (replicas > 0) {
    def.update.set_mode(UpdateSpec::SYNC);
    def.update.set_num_replicas(replicas);
  }
  def.dynamic = DynamicTableDef{};
  def.dynamic->num_buckets = kBuckets;
  return def;
}

absl::Status Create(PsClient* client, const VariableDef& def) {
  auto partitioner = *NewFixedShardsPartitioner(1);
  auto placer = *NewRoundRobinPlacer(client->num_ps());
  return client->CreateVariables({def}, *partitioner, placer.get());
}

std::vector<float> PullAll(PsClient* client, const std::vector<int64_t>& keys) {
  std::vector<float> out(keys.size() * kDim);
  const absl::Status s = client->PullRows("emb", keys, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(BucketMoverTest, AsyncPushesUnderLoadAreAppliedExactlyOnceAcrossMoves) {
  Cluster cluster(2);
  auto chief = cluster.Client();
  ASSERT_TRUE(Create(chief.get(), Table(OptimizerSpec::SGD, InitializerSpec::ZEROS)).ok());
  // SGD at rate 1 from zeros with gradients of 1: a row reads minus the pushes it got, exactly.
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 400; ++k) keys.push_back(k * 7919 + 3);
  constexpr int kWorkers = 3;
  std::atomic<bool> stop{false};
  std::vector<std::map<int64_t, int64_t>> pushed(kWorkers);
  std::vector<absl::Status> failures(kWorkers);
  std::vector<std::thread> workers;
  for (int w = 0; w < kWorkers; ++w) {
    workers.emplace_back([&, w] {
      auto client = cluster.Client();
      if (!client->Discover().ok()) return;
      std::mt19937 rng(w);
      while (!stop.load()) {
        std::vector<int64_t> batch;
        for (int i = 0; i < 50; ++i) batch.push_back(keys[rng() % keys.size()]);
        const std::vector<float> grads(batch.size() * kDim, 1.0f);
        const absl::Status s = client->PushRows("emb", batch, grads);
        if (!s.ok()) {
          failures[w] = s;
          return;
        }
        for (int64_t k : batch) ++pushed[w][k];
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(30));
  auto moved = MoveTableBuckets(chief.get(), "emb", 0, 1, 6);
  ASSERT_TRUE(moved.ok()) << moved.status();
  auto back = MoveTableBuckets(chief.get(), "emb", 1, 0, 3);
  ASSERT_TRUE(back.ok()) << back.status();
  absl::SleepFor(absl::Milliseconds(30));
  stop = true;
  for (std::thread& t : workers) t.join();
  for (const absl::Status& s : failures) EXPECT_TRUE(s.ok()) << s;

  EXPECT_EQ(moved->buckets, 6);
  EXPECT_GT(moved->rows, 0);
  EXPECT_GT(moved->bytes, 0);
  EXPECT_EQ(back->routing_version, 9);  // six moves, then three
  const VariableLayout layout = *chief->GetLayout("emb");
  EXPECT_EQ(layout.shards[0].buckets.end, kBuckets / 2 - 3);
  EXPECT_EQ(layout.shards[1].buckets.begin, kBuckets / 2 - 3);
  EXPECT_EQ(layout.routing_version, 9);

  std::map<int64_t, int64_t> total;
  for (const auto& counts : pushed) {
    for (const auto& [k, n] : counts) total[k] += n;
  }
  const std::vector<float> rows = PullAll(chief.get(), keys);
  int64_t checked = 0;
  for (size_t i = 0; i < keys.size(); ++i) {
    for (int64_t j = 0; j < kDim; ++j) {
      ASSERT_EQ(rows[i * kDim + j], -static_cast<float>(total[keys[i]])) << "key " << keys[i];
    }
    checked += total[keys[i]];
  }
  EXPECT_GT(checked, 0);
}

// A SYNC run of `steps` steps by two replicas, each with its own client. In every step with
// an entry in `moves` ({from, to, count}), a third client moves buckets after both replicas
// have pulled and before they push: they push by the layout they pulled with. With
// `add_ps_at` >= 0, the table starts on 2 of the 3 ps, and before that step the third ps gets
// an empty shard of it (as a ps added live does: coordinator/ps_scaling.h), the replicas
// switch to clients of all 3, and the table is balanced. The table's rows of `keys` at the end.
std::vector<float> RunSync(int steps, const std::map<int, std::vector<int>>& moves,
                           const std::vector<int64_t>& keys, std::atomic<int>* rerouted_pushes,
                           int add_ps_at = -1) {
  Cluster cluster(3);
  const size_t first_ps = add_ps_at >= 0 ? 2 : 3;
  auto chief = cluster.Client(first_ps);
  EXPECT_TRUE(Create(chief.get(), Table(OptimizerSpec::ADAM, InitializerSpec::RANDOM_NORMAL,
                                        /*replicas=*/2))
                  .ok());
  std::vector<std::unique_ptr<PsClient>> replicas;
  for (int r = 0; r < 2; ++r) {
    replicas.push_back(cluster.Client(first_ps));
    EXPECT_TRUE(replicas.back()->Discover().ok());
  }
  for (int step = 0; step < steps; ++step) {
    if (step == add_ps_at) {
      const VariableLayout before = *chief->GetLayout("emb");
      chief = cluster.Client();
      CreateShardsRequest add;
      *add.add_shards() = before.shards.back().spec;
      ShardSpec& spec = *add.mutable_shards(0);
      spec.set_name("emb/part_2");
      spec.set_part(2);
      spec.set_num_parts(3);
      spec.mutable_dynamic()->set_bucket_begin(kBuckets);
      spec.mutable_dynamic()->set_bucket_end(kBuckets);
      add.set_start_version(step);  // one update a sync step
      add.set_routing_version(before.routing_version);
      CreateShardsResponse created;
      EXPECT_TRUE(chief->CreateShards(2, add, &created).ok());
      EXPECT_TRUE(chief->Discover().ok());
      const VariableLayout added = *chief->GetLayout("emb");
      EXPECT_EQ(added.shards.size(), 3u);
      EXPECT_EQ(added.shards[2].ps, 2);
      EXPECT_EQ(added.shards[2].buckets.begin, kBuckets);  // empty, last
      for (auto& replica : replicas) {
        replica = cluster.Client();
        EXPECT_TRUE(replica->Discover().ok());
      }
      auto balanced = BalanceTableBuckets(chief.get(), "emb", 0.1);
      EXPECT_TRUE(balanced.ok()) << balanced.status();
      if (balanced.ok()) EXPECT_EQ(balanced->moves.size(), 2u);
      EXPECT_TRUE(chief->Discover().ok());
      EXPECT_GT(chief->GetLayout("emb")->shards[2].buckets.end -
                    chief->GetLayout("emb")->shards[2].buckets.begin,
                kBuckets / 4);
    }
    std::vector<std::vector<int64_t>> batches(2);
    std::vector<std::vector<float>> grads(2);
    for (int r = 0; r < 2; ++r) {
      std::mt19937 rng(step * 2 + r);
      for (int i = 0; i < 40; ++i) batches[r].push_back(keys[rng() % keys.size()]);
      std::vector<float> params(batches[r].size() * kDim);
      PullOptions pull;
      pull.min_version = step;
      pull.exact_version = true;
      EXPECT_TRUE(replicas[r]->PullRows("emb", batches[r], absl::MakeSpan(params), pull).ok());
      grads[r].resize(params.size());
      for (size_t i = 0; i < params.size(); ++i) {
        grads[r][i] = 0.1f * params[i] + 0.01f * static_cast<float>(i % 5);
      }
    }
    auto it = moves.find(step);
    if (it != moves.end()) {
      auto moved = MoveTableBuckets(chief.get(), "emb", it->second[0], it->second[1],
                                    it->second[2]);
      EXPECT_TRUE(moved.ok()) << moved.status();
    }
    std::vector<std::thread> threads;
    for (int r = 0; r < 2; ++r) {
      threads.emplace_back([&, r] {
        PushOptions push;
        push.has_sync = true;
        push.sync.set_step(step);
        push.sync.set_replica(r);
        const int64_t before = replicas[r]->GetLayout("emb")->routing_version;
        const absl::Status s = replicas[r]->PushRows("emb", batches[r], grads[r], push);
        EXPECT_TRUE(s.ok()) << s;
        if (replicas[r]->GetLayout("emb")->routing_version != before) ++*rerouted_pushes;
      });
    }
    for (std::thread& t : threads) t.join();
  }
  std::vector<float> out(keys.size() * kDim);
  PullOptions last;
  last.min_version = steps;
  EXPECT_TRUE(chief->PullRows("emb", keys, absl::MakeSpan(out), last).ok());
  return out;
}

TEST(BucketMoverTest, SyncRunAcrossMovesIsBitIdenticalToAnUnmovedRun) {
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 300; ++k) keys.push_back(k * 104729 + 11);
  std::atomic<int> unmoved_reroutes{0}, moved_reroutes{0};
  const std::vector<float> want = RunSync(12, {}, keys, &unmoved_reroutes);
  const std::vector<float> got =
      RunSync(12, {{2, {0, 1, 4}}, {5, {2, 1, 3}}, {8, {1, 0, 6}}}, keys, &moved_reroutes);
  EXPECT_EQ(unmoved_reroutes, 0);
  EXPECT_GT(moved_reroutes, 0);  // the replicas' layouts were old, and they routed again
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "float " << i;
}

TEST(BucketMoverTest, SyncRunWithAPsAddedMidRunIsBitIdenticalToARunOnAllOfThem) {
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 300; ++k) keys.push_back(k * 104729 + 11);
  std::atomic<int> plain_reroutes{0}, added_reroutes{0};
  const std::vector<float> want = RunSync(10, {}, keys, &plain_reroutes);
  const std::vector<float> got = RunSync(10, {}, keys, &added_reroutes, /*add_ps_at=*/4);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << "float " << i;
}

// A shard emptied before its ps is removed live: with may_empty_source its every bucket moves
// to its neighbour, which then serves every row; it holds none, and takes pushes of none.
TEST(BucketMoverTest, ASourceGivesEveryBucketWhenItMayBeEmptied) {
  Cluster cluster(2);
  auto chief = cluster.Client();
  ASSERT_TRUE(Create(chief.get(), Table(OptimizerSpec::SGD, InitializerSpec::ZEROS)).ok());
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 200; ++k) keys.push_back(k * 7919 + 5);
  ASSERT_TRUE(chief->PushRows("emb", keys, std::vector<float>(keys.size() * kDim, 1.0f)).ok());
  auto refused = MoveTableBuckets(chief.get(), "emb", 1, 0, 32);
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "must keep at least one"))
      << refused.status();
  BucketMoveOptions options;
  options.may_empty_source = true;
  options.buckets_per_switch = 8;
  EXPECT_EQ(MoveTableBuckets(chief.get(), "emb", 1, 0, 33, options).status().code(),
            absl::StatusCode::kInvalidArgument);  // more than it holds
  auto moved = MoveTableBuckets(chief.get(), "emb", 1, 0, 32, options);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->buckets, 32);
  const VariableLayout layout = *chief->GetLayout("emb");
  ASSERT_EQ(layout.shards.size(), 2u);
  EXPECT_EQ(layout.shards[0].buckets.end, kBuckets);
  EXPECT_EQ(layout.shards[1].buckets.begin, kBuckets);  // empty, last
  EXPECT_EQ(layout.shards[1].buckets.end, kBuckets);
  for (float v : PullAll(chief.get(), keys)) ASSERT_EQ(v, -1.0f);
  ASSERT_TRUE(chief->PushRows("emb", keys, std::vector<float>(keys.size() * kDim, 1.0f)).ok());
  for (float v : PullAll(chief.get(), keys)) ASSERT_EQ(v, -2.0f);
}

TEST(BucketMoverTest, RefusalsNameWhatIsWrongAndChangeNothing) {
  Cluster cluster(3);
  auto chief = cluster.Client();
  ASSERT_TRUE(Create(chief.get(), Table(OptimizerSpec::SGD, InitializerSpec::ZEROS)).ok());
  VariableDef dense;
  dense.name = "w";
  dense.shape = {8, 2};
  dense.initializer.set_type(InitializerSpec::ZEROS);
  dense.optimizer.set_type(OptimizerSpec::SGD);
  dense.optimizer.set_learning_rate(1);
  auto partitioner = *NewFixedShardsPartitioner(2);
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(chief->CreateVariables({dense}, *partitioner, placer.get()).ok());
  auto refused = [&](const std::string& variable, int from, int to, int count,
                     const char* words) {
    auto r = MoveTableBuckets(chief.get(), variable, from, to, count);
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(absl::StrContains(r.status().message(), words)) << r.status();
  };
  refused("w", 0, 1, 1, "not a dynamic table");
  refused("nope", 0, 1, 1, "nope");
  refused("emb", 0, 2, 1, "neighbouring");
  refused("emb", 0, 3, 1, "neighbouring");
  refused("emb", 0, 1, 0, "count");
  refused("emb", 1, 0, 21, "must keep at least one");
  ASSERT_TRUE(chief->Discover().ok());
  const VariableLayout layout = *chief->GetLayout("emb");
  EXPECT_EQ(layout.routing_version, 0);
  EXPECT_EQ(layout.shards[1].buckets.begin, 22);  // SplitBuckets(64, 3): 22, 21, 21
  EXPECT_EQ(layout.shards[1].buckets.end, 43);
}

TEST(BucketMoverTest, SyncFreezeWaitsForTheStepBoundaryThroughBeforeSwitch) {
  Cluster cluster(2);
  auto chief = cluster.Client();
  ASSERT_TRUE(Create(chief.get(), Table(OptimizerSpec::ADAGRAD, InitializerSpec::ZEROS, 2)).ok());
  auto replica = cluster.Client();
  ASSERT_TRUE(replica->Discover().ok());
  // Replica 0 pushes step 0; replica 1 has not: the step is partly pushed on both shards.
  PushOptions push;
  push.has_sync = true;
  push.sync.set_step(0);
  push.sync.set_replica(0);
  const std::vector<int64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<float> grads(keys.size() * kDim, 0.5f);
  ASSERT_TRUE(replica->PushRows("emb", keys, grads, push).ok());
  auto partly = MoveTableBuckets(chief.get(), "emb", 0, 1, 1);
  ASSERT_FALSE(partly.ok());
  EXPECT_TRUE(absl::StrContains(partly.status().message(), "partly pushed"))
      << partly.status();
  // The chief's drain is what before_switch stands for: here, replica 1 finishes the step.
  BucketMoveOptions options;
  options.before_switch = [&] {
    PushOptions other = push;
    other.sync.set_replica(1);
    return replica->PushRows("emb", keys, grads, other);
  };
  auto moved = MoveTableBuckets(chief.get(), "emb", 0, 1, 1, options);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->buckets, 1);
}

TEST(BucketMoverTest, BucketsSwitchTogetherInRunsOfPerSwitch) {
  Cluster cluster(2);
  auto chief = cluster.Client();
  ASSERT_TRUE(Create(chief.get(), Table(OptimizerSpec::SGD, InitializerSpec::ZEROS)).ok());
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 200; ++k) keys.push_back(k * 31 + 1);
  ASSERT_TRUE(chief->PushRows("emb", keys, std::vector<float>(keys.size() * kDim, 1.0f)).ok());
  BucketMoveOptions options;
  options.buckets_per_switch = 4;
  auto moved = MoveTableBuckets(chief.get(), "emb", 0, 1, 10, options);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->buckets, 10);
  EXPECT_EQ(moved->routing_version, 3);  // runs of 4, 4 and 2
  EXPECT_EQ(chief->GetLayout("emb")->shards[1].buckets.begin, kBuckets / 2 - 10);
  const std::vector<float> rows = PullAll(chief.get(), keys);
  for (float v : rows) ASSERT_EQ(v, -1.0f);
}

TEST(BucketMoverTest, MovesCutOffMidSwitchAreFinishedOrAbortedByTheNextChief) {
  Cluster cluster(2);
  auto chief = cluster.Client();
  ASSERT_TRUE(Create(chief.get(), Table(OptimizerSpec::SGD, InitializerSpec::ZEROS)).ok());
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 400; ++k) keys.push_back(k * 7919 + 3);
  const std::vector<float> ones(keys.size() * kDim, 1.0f);
  ASSERT_TRUE(chief->PushRows("emb", keys, ones).ok());
  const VariableLayout layout = *chief->GetLayout("emb");
  ASSERT_EQ(layout.shards[0].buckets.end, kBuckets / 2);

  // Cut off after the drop: bucket 31 is on no shard, staged on shard 1.
  ASSERT_TRUE(testing::CutOffMove(chief.get(), layout, 0, 1, 31, /*drop=*/true).ok());
  EXPECT_EQ(chief->Discover().code(), absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<CutOffMoves> cut = FinishCutOffMoves(chief.get(), {"emb", "not_there"});
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->finished, 1);
  EXPECT_EQ(cut->aborted, 0);
  ASSERT_EQ(cut->what.size(), 1u);
  EXPECT_TRUE(absl::StrContains(cut->what[0], "finished the move of buckets [31, 32)"))
      << cut->what[0];
  ASSERT_TRUE(chief->Discover().ok());
  EXPECT_EQ(chief->GetLayout("emb")->shards[1].buckets.begin, 31);
  EXPECT_EQ(chief->GetLayout("emb")->routing_version, 1);
  for (float v : PullAll(chief.get(), keys)) ASSERT_EQ(v, -1.0f);

  // Cut off before the drop: bucket 30 frozen on shard 0, staged on shard 1.
  ASSERT_TRUE(testing::CutOffMove(chief.get(), *chief->GetLayout("emb"), 0, 1, 30, false).ok());
  const int64_t in_30 = [&] {
    for (int64_t k : keys) {
      if (BucketOf(k, kBuckets) == 30) return k;
    }
    return int64_t{-1};
  }();
  ASSERT_GE(in_30, 0);
  const std::vector<float> grad(kDim, 1.0f);
  EXPECT_EQ(chief->PushRows("emb", {in_30}, grad).code(), absl::StatusCode::kAborted)
      << "frozen for a minute";
  cut = FinishCutOffMoves(chief.get(), {"emb"});
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_EQ(cut->finished, 0);
  EXPECT_EQ(cut->aborted, 1);
  std::vector<ListShardsResponse> listed;
  ASSERT_TRUE(chief->ListShardsAll(ListShardsRequest(), &listed).ok());
  for (const ListShardsResponse& ps : listed) {
    for (const ShardInfo& info : ps.shards()) {
      EXPECT_EQ(info.staged_end(), info.staged_begin()) << info.ShortDebugString();
    }
  }
  ASSERT_TRUE(chief->Discover().ok());
  EXPECT_EQ(chief->GetLayout("emb")->shards[0].buckets.end, 31);  // bucket 30 stayed
  // Thawed: the push goes through at once, to shard 0.
  ASSERT_TRUE(chief->PushRows("emb", {in_30}, grad).ok());
  const std::vector<float> after = PullAll(chief.get(), keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(after[i * kDim], keys[i] == in_30 ? -2.0f : -1.0f) << "key " << keys[i];
  }
  // Nothing left to do: a second pass finds nothing.
  cut = FinishCutOffMoves(chief.get(), {"emb"});
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(cut->finished + cut->aborted, 0);
}

TEST(BucketMoverTest, PlanBalanceMovesBoundariesWhereTheRowsSplitEvenly) {
  // 300 rows over 32 buckets and 100 over 32: the boundary goes to 200 / (300 / 32) = 21.3.
  EXPECT_EQ(PlanBalance({{0, 32}, {32, 64}}, {300, 100}, 0.1),
            (std::vector<PlannedMove>{{0, 1, 11}}));
  // Within the tolerance, and an empty table: nothing.
  EXPECT_TRUE(PlanBalance({{0, 32}, {32, 64}}, {105, 100}, 0.1).empty());
  EXPECT_TRUE(PlanBalance({{0, 32}, {32, 64}}, {0, 0}, 0.1).empty());
  // A shard added to the table holds nothing: it takes its share along the chain, by rows,
  // or by buckets while the table has no row.
  EXPECT_EQ(PlanBalance({{0, 32}, {32, 64}, {64, 64}}, {300, 300, 0}, 0.1),
            (std::vector<PlannedMove>{{0, 1, 11}, {1, 2, 21}}));
  EXPECT_EQ(PlanBalance({{0, 32}, {32, 64}, {64, 64}}, {0, 0, 0}, 0.1),
            (std::vector<PlannedMove>{{0, 1, 11}, {1, 2, 21}}));
  EXPECT_TRUE(PlanBalance({{0, 64}}, {500}, 0.1).empty());
  // Every row on the last of three shards, the first two holding a bucket each: shard 1 must
  // take from shard 2 before it can give to shard 0.
  EXPECT_EQ(PlanBalance({{0, 1}, {1, 2}, {2, 12}}, {0, 0, 1000}, 0.0),
            (std::vector<PlannedMove>{{2, 1, 7}, {1, 0, 4}}));
  // The other way round, and each shard keeps a bucket even when the rows say otherwise.
  EXPECT_EQ(PlanBalance({{0, 10}, {10, 11}, {11, 12}}, {1000, 0, 0}, 0.0),
            (std::vector<PlannedMove>{{0, 1, 7}, {1, 2, 4}}));
  EXPECT_EQ(Imbalance({300, 100}), 1.5);
  EXPECT_EQ(Imbalance({0, 0}), 0);
}

TEST(BucketMoverTest, BalanceEvensOutAHotShardAndKeepsEveryRow) {
  Cluster cluster(2);
  auto chief = cluster.Client();
  ASSERT_TRUE(Create(chief.get(), Table(OptimizerSpec::SGD, InitializerSpec::ZEROS)).ok());
  // Every row on shard 0 (buckets [0, 32)): ps 0 is the hot one.
  std::vector<int64_t> keys;
  for (int64_t k = 1; keys.size() < 600; ++k) {
    if (BucketOf(k * 7919, kBuckets) < kBuckets / 2) keys.push_back(k * 7919);
  }
  ASSERT_TRUE(chief->PushRows("emb", keys, std::vector<float>(keys.size() * kDim, 1.0f)).ok());
  BucketMoveOptions options;
  options.buckets_per_switch = 4;
  absl::StatusOr<BalanceStats> balanced = BalanceTableBuckets(chief.get(), "emb", 0.1, options);
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  EXPECT_EQ(balanced->imbalance_before, 2.0);
  EXPECT_LT(balanced->imbalance_after, 1.25);
  ASSERT_EQ(balanced->moves.size(), 1u);
  EXPECT_EQ(balanced->moves[0].from_shard, 0);
  EXPECT_EQ(balanced->moves[0].count, 16);
  EXPECT_EQ(balanced->moved.buckets, 16);
  EXPECT_GT(balanced->moved.rows, 200);
  EXPECT_EQ(chief->GetLayout("emb")->shards[1].buckets.begin, 16);
  for (float v : PullAll(chief.get(), keys)) ASSERT_EQ(v, -1.0f);
  // Balanced now: a second call moves nothing.
  balanced = BalanceTableBuckets(chief.get(), "emb", 0.3, options);
  ASSERT_TRUE(balanced.ok()) << balanced.status();
  EXPECT_TRUE(balanced->moves.empty());
  EXPECT_EQ(BalanceTableBuckets(chief.get(), "emb", -1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BalanceTableBuckets(chief.get(), "nope", 0.1).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace shardps
