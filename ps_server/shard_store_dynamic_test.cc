// Dynamic tables served by the store (ShardSpec.dynamic): rows keyed by 64-bit
// keys, made by the first push, read as their initial value before; identical initial rows
// whatever the shard; keys outside the shard's buckets and row ranges refused with nothing
// changed; SYNC steps bit-reproducible and re-runnable; admission and eviction through the
// spec; statistics in ListShards.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "partitioners/buckets.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

constexpr int kDim = 4;
constexpr int kBuckets = 64;

ShardSpec DynamicShard(const std::string& variable, int part, int parts, int begin, int end,
                       OptimizerSpec::Type optimizer = OptimizerSpec::ADAGRAD, int sync = 0) {
  ShardSpec spec;
  spec.set_name(parts == 1 ? variable : absl::StrCat(variable, "/part_", part));
  spec.set_variable(variable);
  spec.set_part(part);
  spec.set_num_parts(parts);
  for (int64_t d : {int64_t{0}, int64_t{kDim}}) {
    spec.mutable_shape()->add_dim(d);
    spec.mutable_full_shape()->add_dim(d);
  }
  spec.mutable_initializer()->set_type(InitializerSpec::RANDOM_UNIFORM);
  spec.mutable_initializer()->set_seed(7);
  spec.mutable_optimizer()->set_type(optimizer);
  spec.mutable_optimizer()->set_learning_rate(0.5);
  if (sync > 0) {
    spec.mutable_update()->set_mode(UpdateSpec::SYNC);
    spec.mutable_update()->set_num_replicas(sync);
  }
  DynamicSpec* d = spec.mutable_dynamic();
  d->set_num_buckets(kBuckets);
  d->set_bucket_begin(begin);
  d->set_bucket_end(end);
  return spec;
}

std::unique_ptr<ShardStore> StoreWith(const std::vector<ShardSpec>& specs) {
  auto store = ShardStore::Create({});
  EXPECT_TRUE(store.ok()) << store.status();
  CreateShardsRequest request;
  for (const ShardSpec& spec : specs) *request.add_shards() = spec;
  CreateShardsResponse response;
  const absl::Status created = (*store)->CreateShards(request, &response);
  EXPECT_TRUE(created.ok()) << created;
  return *std::move(store);
}

std::string IdsBytes(const std::vector<int64_t>& keys) {
  return std::string(reinterpret_cast<const char*>(keys.data()), keys.size() * sizeof(int64_t));
}

absl::StatusOr<std::vector<float>> PullKeys(ShardStore& store, const std::string& shard,
                                            const std::vector<int64_t>& keys,
                                            int64_t exact_version = -1,
                                            int64_t* version = nullptr) {
  PullRowsRequest request;
  request.set_shard(shard);
  request.set_ids_bytes(IdsBytes(keys));
  if (exact_version >= 0) {
    request.set_exact_version(true);
    request.set_min_version(exact_version);
  }
  PullRowsResponse response;
  absl::Status status;
  store.PullRows(request, &response, [&](const absl::Status& s) { status = s; });
  if (!status.ok()) return status;
  if (version != nullptr) *version = response.version();
  std::vector<float> rows(response.data().size() / sizeof(float));
  std::memcpy(rows.data(), response.data().data(), response.data().size());
  return rows;
}

absl::Status PushKeys(ShardStore& store, const std::string& shard,
                      const std::vector<int64_t>& keys, const std::vector<float>& grads,
                      uint64_t request_id, int replica = -1, int64_t step = 0,
                      PushRowsResponse* response = nullptr) {
  PushRowsRequest request;
  request.set_request_id(request_id);
  request.set_shard(shard);
  request.set_ids_bytes(IdsBytes(keys));
  request.set_data(std::string(reinterpret_cast<const char*>(grads.data()),
                               grads.size() * sizeof(float)));
  if (replica >= 0) {
    request.mutable_sync()->set_replica(replica);
    request.mutable_sync()->set_step(step);
  }
  PushRowsResponse own;
  return store.PushRows(request, response != nullptr ? response : &own);
}

// Keys of buckets [begin, end) of kBuckets, spread over the int64 range.
std::vector<int64_t> KeysIn(int begin, int end, int n) {
  std::vector<int64_t> keys;
  for (int64_t k = -5000000000LL; static_cast<int>(keys.size()) < n; k += 1234567891LL) {
    const int32_t b = BucketOf(k, kBuckets);
    if (b >= begin && b < end) keys.push_back(k);
  }
  return keys;
}

// Summed over the variable's shards on the store.
DynamicShardStats Stats(ShardStore& store, const std::string& variable) {
  ListShardsRequest request;
  request.set_variable(variable);
  ListShardsResponse response;
  EXPECT_TRUE(store.ListShards(request, &response).ok());
  EXPECT_GE(response.shards_size(), 1);
  DynamicShardStats sum;
  for (const ShardInfo& info : response.shards()) {
    sum.set_rows(sum.rows() + info.dynamic().rows());
    sum.set_created(sum.created() + info.dynamic().created());
    sum.set_evicted_budget(sum.evicted_budget() + info.dynamic().evicted_budget());
    sum.set_admission_denied(sum.admission_denied() + info.dynamic().admission_denied());
  }
  return sum;
}

TEST(DynamicShardTest, PullsNeverCreatePushesDoAndEveryShardAgreesOnInitialRows) {
  // One table split in two (buckets [0, 20) and [20, 64)) and the whole table elsewhere.
  auto split = StoreWith({DynamicShard("emb", 0, 2, 0, 20), DynamicShard("emb", 1, 2, 20, 64)});
  auto whole = StoreWith({DynamicShard("emb", 0, 1, 0, 64)});
  const std::vector<int64_t> low = KeysIn(0, 20, 30), high = KeysIn(20, 64, 30);
  auto a = PullKeys(*split, "emb/part_0", low);
  auto b = PullKeys(*split, "emb/part_1", high);
  std::vector<int64_t> all = low;
  all.insert(all.end(), high.begin(), high.end());
  auto c = PullKeys(*whole, "emb", all);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status() << b.status() << c.status();
  std::vector<float> ab = *a;
  ab.insert(ab.end(), b->begin(), b->end());
  EXPECT_EQ(ab, *c) << "a key's initial row depends on (seed, variable, key) only";
  bool nonzero = false;
  for (float x : *c) nonzero |= x != 0;
  EXPECT_TRUE(nonzero);
  EXPECT_EQ(Stats(*whole, "emb").rows(), 0) << "pulls made rows";

  // A push makes rows (duplicates summed) and moves them by the optimizer.
  const std::vector<int64_t> keys = {low[0], low[1], low[0]};
  const std::vector<float> grads(3 * kDim, 1.0f);
  ASSERT_TRUE(PushKeys(*split, "emb/part_0", keys, grads, 1).ok());
  EXPECT_EQ(Stats(*split, "emb").rows(), 2);
  auto after = PullKeys(*split, "emb/part_0", {low[0], low[1], low[2]});
  ASSERT_TRUE(after.ok());
  for (int j = 0; j < kDim; ++j) {
    EXPECT_LT((*after)[j], (*a)[j]) << "pushed row 0 moved";
    EXPECT_LT((*after)[kDim + j], (*a)[kDim + j]);
    EXPECT_EQ((*after)[2 * kDim + j], (*a)[2 * kDim + j]) << "untouched row 2 did not";
  }
  // Adagrad: a summed gradient of 2 moves row 0 further than row 1's 1.
  EXPECT_LT((*after)[0] - (*a)[0], (*after)[kDim] - (*a)[kDim] + 1e-7);
  // The same request id again changes nothing.
  PushRowsResponse again;
  ASSERT_TRUE(PushKeys(*split, "emb/part_0", keys, grads, 1, -1, 0, &again).ok());
  EXPECT_TRUE(again.duplicate());
  EXPECT_EQ(*PullKeys(*split, "emb/part_0", {low[0], low[1], low[2]}), *after);
}

// A dynamic table without a row budget reserves nothing; Health counts the memory its rows
// take, which grows as pushes make rows (and matches what ListShards reports for it).
TEST(DynamicShardTest, HealthCountsADynamicTablesMemoryAsItGrows) {
  auto store = StoreWith({DynamicShard("emb", 0, 1, 0, 64)});
  HealthResponse empty;
  store->Health(&empty);
  const std::vector<int64_t> keys = KeysIn(0, 64, 500);
  ASSERT_TRUE(PushKeys(*store, "emb", keys, std::vector<float>(keys.size() * kDim, 0.5f), 1).ok());
  HealthResponse grown;
  store->Health(&grown);
  // At least the rows' parameters and Adagrad accumulators.
  EXPECT_GE(grown.bytes() - empty.bytes(),
            static_cast<int64_t>(keys.size()) * kDim * 2 * static_cast<int64_t>(sizeof(float)));
  ListShardsRequest list;
  ListShardsResponse shards;
  ASSERT_TRUE(store->ListShards(list, &shards).ok());
  ASSERT_EQ(shards.shards_size(), 1);
  EXPECT_EQ(grown.bytes(), shards.shards(0).dynamic().index_bytes() +
                               shards.shards(0).dynamic().arena_bytes());
}

TEST(DynamicShardTest, BadRequestsNameTheKeyOrShardAndChangeNothing) {
  auto store = StoreWith({DynamicShard("emb", 0, 2, 0, 20)});
  const std::vector<int64_t> mine = KeysIn(0, 20, 3), other = KeysIn(20, 64, 1);
  auto before = PullKeys(*store, "emb/part_0", mine);
  ASSERT_TRUE(before.ok());
  std::vector<int64_t> keys = mine;
  keys.push_back(other[0]);
  const absl::Status push =
      PushKeys(*store, "emb/part_0", keys, std::vector<float>(keys.size() * kDim, 1.0f), 9);
  // The caller's layout is out of date: ABORTED with BUCKET_MOVED, to route again.
  EXPECT_EQ(push.code(), absl::StatusCode::kAborted) << push;
  EXPECT_EQ(DetailKind(push), ErrorDetail::BUCKET_MOVED) << push;
  EXPECT_TRUE(absl::StrContains(push.message(), absl::StrCat("key ", other[0], " at position 3")))
      << push;
  EXPECT_TRUE(absl::StrContains(push.message(), "[0, 20)")) << push;
  EXPECT_EQ(*PullKeys(*store, "emb/part_0", mine), *before);
  EXPECT_EQ(Stats(*store, "emb").rows(), 0);
  const absl::Status pull = PullKeys(*store, "emb/part_0", keys).status();
  EXPECT_EQ(pull.code(), absl::StatusCode::kAborted) << pull;
  EXPECT_EQ(DetailKind(pull), ErrorDetail::BUCKET_MOVED) << pull;

  // A non-finite gradient: refused, nothing made.
  std::vector<float> nan(mine.size() * kDim, 1.0f);
  nan[5] = std::nanf("");
  EXPECT_EQ(PushKeys(*store, "emb/part_0", mine, nan, 10).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Stats(*store, "emb").rows(), 0);

  // Row ranges (dense pulls, pushes, assigns) do not exist for a dynamic table.
  PullRequest dense;
  dense.set_shard("emb/part_0");
  PullResponse dense_response;
  absl::Status dense_status;
  store->Pull(dense, &dense_response, [&](const absl::Status& s) { dense_status = s; });
  EXPECT_EQ(dense_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(dense_status.message(), "is a dynamic table")) << dense_status;

  // Bad specs name the field.
  auto fresh = *ShardStore::Create({});
  CreateShardsResponse created;
  for (auto mutate : std::vector<std::function<void(ShardSpec*)>>{
           [](ShardSpec* s) { s->mutable_dynamic()->set_bucket_end(65); },
           [](ShardSpec* s) { s->mutable_shape()->set_dim(0, 10); },
           [](ShardSpec* s) { s->mutable_dynamic()->set_admit_after(256); },
           [](ShardSpec* s) { s->mutable_update()->set_delay_compensation(0.1); }}) {
    CreateShardsRequest request;
    *request.add_shards() = DynamicShard("bad", 0, 1, 0, 64);
    mutate(request.mutable_shards(0));
    const absl::Status s = fresh->CreateShards(request, &created);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "shard 'bad'")) << s;
  }
}

// Two replicas' pushes in either order give the same rows; a re-run of the step after it was
// applied reads the rows before it (exact version), as dense SYNC shards keep theirs.
TEST(DynamicShardTest, SyncStepsAreBitReproducibleAndReRunnable) {
  const std::vector<int64_t> keys = KeysIn(0, 64, 6);
  std::vector<float> g0(3 * kDim), g1(4 * kDim);
  for (size_t i = 0; i < g0.size(); ++i) g0[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
  for (size_t i = 0; i < g1.size(); ++i) g1[i] = 0.07f * static_cast<float>(i % 5) + 0.01f;
  const std::vector<int64_t> k0 = {keys[0], keys[1], keys[2]};
  const std::vector<int64_t> k1 = {keys[2], keys[3], keys[4], keys[0]};
  std::vector<float> results[2];
  for (int order = 0; order < 2; ++order) {
    auto store = StoreWith({DynamicShard("s", 0, 1, 0, 64, OptimizerSpec::ADAM, 2)});
    auto before = PullKeys(*store, "s", keys);
    ASSERT_TRUE(before.ok());
    PushRowsResponse r;
    if (order == 0) {
      ASSERT_TRUE(PushKeys(*store, "s", k0, g0, 1, 0, 0, &r).ok());
      EXPECT_FALSE(r.applied());
      ASSERT_TRUE(PushKeys(*store, "s", k1, g1, 2, 1, 0, &r).ok());
    } else {
      ASSERT_TRUE(PushKeys(*store, "s", k1, g1, 2, 1, 0, &r).ok());
      ASSERT_TRUE(PushKeys(*store, "s", k0, g0, 1, 0, 0, &r).ok());
    }
    EXPECT_TRUE(r.applied());
    int64_t version = 0;
    auto after = PullKeys(*store, "s", keys, -1, &version);
    ASSERT_TRUE(after.ok());
    EXPECT_EQ(version, 1);
    EXPECT_NE(*after, *before);
    results[order] = *after;
    // A re-run of step 0 reads what the step read.
    auto rerun = PullKeys(*store, "s", keys, /*exact_version=*/0, &version);
    ASSERT_TRUE(rerun.ok()) << rerun.status();
    EXPECT_EQ(version, 0);
    EXPECT_EQ(*rerun, *before);
    // keys[5] was in no push: its row is its initial value at both versions.
    for (int j = 0; j < kDim; ++j) EXPECT_EQ((*after)[5 * kDim + j], (*before)[5 * kDim + j]);
  }
  EXPECT_EQ(results[0], results[1]) << "arrival order changed the step";
}

// A SYNC step whose push evicts a row (its ttl ran out) still lets a re-run of the step read
// that row as the step read it, not as its initial value.
TEST(DynamicShardTest, AReRunReadsTheRowsItsStepEvictedAsTheyWere) {
  ShardSpec spec = DynamicShard("ttl", 0, 1, 0, 64, OptimizerSpec::ADAGRAD, /*sync=*/1);
  spec.mutable_dynamic()->set_ttl_steps(1);
  auto store = StoreWith({spec});
  // a and c share a bucket (so a push of c sweeps a's stripe); b is in another.
  const std::vector<int64_t> in0 = KeysIn(0, 1, 2);
  const int64_t a = in0[0], c = in0[1], b = KeysIn(1, 2, 1)[0];
  const std::vector<float> g(kDim, 0.5f);
  auto initial = PullKeys(*store, "ttl", {a});
  auto initial_c = PullKeys(*store, "ttl", {c});
  ASSERT_TRUE(initial.ok() && initial_c.ok());
  ASSERT_TRUE(PushKeys(*store, "ttl", {a}, g, 1, 0, 0).ok());  // step 1 trains a
  ASSERT_TRUE(PushKeys(*store, "ttl", {b}, g, 2, 0, 1).ok());  // step 2 leaves a alone
  int64_t version = 0;
  auto trained = PullKeys(*store, "ttl", {a}, -1, &version);
  ASSERT_TRUE(trained.ok());
  ASSERT_EQ(version, 2);
  ASSERT_NE(*trained, *initial);
  ASSERT_TRUE(PushKeys(*store, "ttl", {c}, g, 3, 0, 2).ok());  // step 3 evicts a
  ListShardsRequest list;
  ListShardsResponse shards;
  ASSERT_TRUE(store->ListShards(list, &shards).ok());
  ASSERT_EQ(shards.shards_size(), 1);
  ASSERT_EQ(shards.shards(0).dynamic().evicted_ttl(), 1) << "a was not evicted";
  auto now = PullKeys(*store, "ttl", {a}, -1, &version);
  ASSERT_TRUE(now.ok());
  EXPECT_EQ(version, 3);
  EXPECT_EQ(*now, *initial) << "an evicted row reads as its initial value";
  auto rerun = PullKeys(*store, "ttl", {a, c}, /*exact_version=*/2, &version);
  ASSERT_TRUE(rerun.ok()) << rerun.status();
  EXPECT_EQ(version, 2);
  EXPECT_EQ(std::vector<float>(rerun->begin(), rerun->begin() + kDim), *trained)
      << "a re-run of step 3 must read a as step 3 read it";
  EXPECT_EQ(std::vector<float>(rerun->begin() + kDim, rerun->end()), *initial_c)
      << "c had no row before step 3";
}

// The same pushes to a fixed table and to a dynamic one (both starting at zeros) leave the
// same rows: the optimizer's row-sparse rule and its step count are the same.
TEST(DynamicShardTest, RowsFollowTheSameOptimizerAsAFixedTable) {
  for (OptimizerSpec::Type type :
       {OptimizerSpec::SGD, OptimizerSpec::ADAGRAD, OptimizerSpec::ADAM, OptimizerSpec::FTRL}) {
    ShardSpec dynamic = DynamicShard("d", 0, 1, 0, 64, type);
    dynamic.mutable_initializer()->set_type(InitializerSpec::ZEROS);
    ShardSpec fixed = dynamic;
    fixed.set_name("f");
    fixed.set_variable("f");
    fixed.clear_dynamic();
    fixed.mutable_shape()->set_dim(0, 100);
    fixed.mutable_full_shape()->set_dim(0, 100);
    auto store = StoreWith({dynamic, fixed});
    uint64_t id = 1;
    for (int step = 0; step < 20; ++step) {
      std::vector<int64_t> keys;
      for (int k = 0; k < 10; ++k) keys.push_back((step * 7 + k * k) % 100);
      std::vector<float> grads(keys.size() * kDim);
      for (size_t i = 0; i < grads.size(); ++i) {
        grads[i] = 0.01f * static_cast<float>((i * 31 + step * 17) % 23) - 0.1f;
      }
      ASSERT_TRUE(PushKeys(*store, "d", keys, grads, id++).ok());
      ASSERT_TRUE(PushKeys(*store, "f", keys, grads, id++).ok());
    }
    std::vector<int64_t> all(100);
    for (int k = 0; k < 100; ++k) all[k] = k;
    auto d = PullKeys(*store, "d", all);
    auto f = PullKeys(*store, "f", all);
    ASSERT_TRUE(d.ok() && f.ok());
    EXPECT_EQ(*d, *f) << OptimizerSpec::Type_Name(type);
  }
}

TEST(DynamicShardTest, AdmissionAndBudgetComeFromTheSpec) {
  ShardSpec spec = DynamicShard("adm", 0, 1, 0, 64);
  spec.mutable_dynamic()->set_admit_after(2);
  ShardSpec budget = DynamicShard("bud", 0, 1, 0, 64);
  budget.mutable_dynamic()->set_max_rows(50);
  auto store = StoreWith({spec, budget});
  const std::vector<int64_t> keys = KeysIn(0, 64, 10);
  const std::vector<float> grads(keys.size() * kDim, 1.0f);
  ASSERT_TRUE(PushKeys(*store, "adm", keys, grads, 1).ok());
  EXPECT_EQ(Stats(*store, "adm").rows(), 0) << "first sight: not admitted";
  EXPECT_EQ(Stats(*store, "adm").admission_denied(), 10);
  ASSERT_TRUE(PushKeys(*store, "adm", keys, grads, 2).ok());
  EXPECT_EQ(Stats(*store, "adm").rows(), 10);

  const std::vector<int64_t> many = KeysIn(0, 64, 400);
  for (size_t i = 0; i < many.size(); i += 40) {
    const std::vector<int64_t> part(many.begin() + i, many.begin() + i + 40);
    ASSERT_TRUE(PushKeys(*store, "bud", part, std::vector<float>(40 * kDim, 1.0f), 100 + i).ok());
  }
  const DynamicShardStats stats = Stats(*store, "bud");
  EXPECT_LE(stats.rows(), 50 + 64 + 40) << "within the budget, give or take a push per stripe";
  EXPECT_GT(stats.evicted_budget(), 0);
  EXPECT_EQ(stats.created(), 400);
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// Issue 23 §5: a table without max_rows counts in the ps' memory budget. Health's available
// memory falls as rows are made; a push of new keys past the budget fails with
// RESOURCE_EXHAUSTED naming the variable and shard, and changes nothing; pushes of keys that
// have rows go on; dropping the table gives the memory back.
TEST(DynamicShardBudgetTest, NewKeysPastTheBudgetAreRefusedNamingTheTable) {
  ShardStore::Options options;
  options.memory_budget_bytes = 64 << 10;
  options.snapshot_reserve = 0.5;
  auto store = ShardStore::Create(options);
  ASSERT_TRUE(store.ok()) << store.status();
  CreateShardsRequest create;
  *create.add_shards() = DynamicShard("emb", 1, 2, 0, 64, OptimizerSpec::ADAM);
  CreateShardsResponse created;
  ASSERT_TRUE((*store)->CreateShards(create, &created).ok());
  HealthResponse health;
  (*store)->Health(&health);
  const int64_t empty_available = health.memory_available_bytes();
  EXPECT_EQ(empty_available, 32 << 10);
  const std::vector<int64_t> keys = KeysIn(0, 64, 2000);
  uint64_t request_id = 1;
  size_t pushed = 0;
  absl::Status refused;
  int64_t last_available = empty_available;
  while (refused.ok() && pushed < keys.size()) {
    const std::vector<int64_t> batch(keys.begin() + pushed, keys.begin() + pushed + 50);
    refused = PushKeys(**store, "emb/part_1", batch, std::vector<float>(50 * kDim, 0.5f),
                       request_id++);
    if (!refused.ok()) break;
    pushed += 50;
    (*store)->Health(&health);
    EXPECT_LT(health.memory_available_bytes(), last_available);
    last_available = health.memory_available_bytes();
  }
  ASSERT_LT(pushed, keys.size()) << "2000 new keys fit in 32 KiB";
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "variable 'emb' (shard 'emb/part_1')"))
      << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "--memory_budget_bytes")) << refused;
  ListShardsRequest list;
  ListShardsResponse shards;
  ASSERT_TRUE((*store)->ListShards(list, &shards).ok());
  EXPECT_EQ(shards.shards(0).dynamic().rows(), static_cast<int64_t>(pushed));
  // Keys that have rows still train.
  const std::vector<int64_t> old(keys.begin(), keys.begin() + 10);
  auto before = PullKeys(**store, "emb/part_1", old);
  ASSERT_TRUE(before.ok());
  ASSERT_TRUE(PushKeys(**store, "emb/part_1", old, std::vector<float>(10 * kDim, 0.5f),
                       request_id++)
                  .ok());
  EXPECT_NE(*PullKeys(**store, "emb/part_1", old), *before);
  DropShardsRequest drop;
  drop.set_all(true);
  DropShardsResponse dropped;
  ASSERT_TRUE((*store)->DropShards(drop, &dropped).ok());
  (*store)->Health(&health);
  EXPECT_EQ(health.memory_available_bytes(), empty_available);
}

// Issue 23 §5: in SYNC mode the overflow comes from the summed update. The step fails for
// all its replicas: the push that completes it fails (INVALID_ARGUMENT naming the variable
// and shard), a pull waiting for the version after it fails with the same error, the shard
// stays at its version with its rows unchanged, and a re-run's push fails again.
TEST(DynamicShardFiniteTest, ASyncStepWhoseSumOverflowsFailsForAllReplicas) {
  auto store = StoreWith({DynamicShard("s", 0, 2, 0, 64, OptimizerSpec::SGD, 2)});
  const std::vector<int64_t> keys = KeysIn(0, 64, 2);
  auto before = PullKeys(*store, "s/part_0", keys);
  ASSERT_TRUE(before.ok());
  // Replica 1's next step waits for version 1.
  PullRowsRequest wait;
  wait.set_shard("s/part_0");
  wait.set_ids_bytes(IdsBytes(keys));
  wait.set_min_version(1);
  wait.set_wait_timeout_ms(60000);
  PullRowsResponse waited;
  absl::Status wait_status = absl::UnknownError("not done");
  store->PullRows(wait, &waited, [&](const absl::Status& s) { wait_status = s; });
  EXPECT_EQ(wait_status.code(), absl::StatusCode::kUnknown);  // still waiting
  // Each gradient is finite, their sum is not (and lr * sum passes the float range).
  std::vector<float> g(2 * kDim, 1.0f);
  g[0] = -3e38f;
  ASSERT_TRUE(PushKeys(*store, "s/part_0", keys, g, 1, /*replica=*/1, /*step=*/0).ok());
  const absl::Status last = PushKeys(*store, "s/part_0", keys, g, 2, /*replica=*/0, 0);
  EXPECT_EQ(last.code(), absl::StatusCode::kInvalidArgument) << last;
  EXPECT_TRUE(absl::StrContains(last.message(), "variable 's' (shard 's/part_0')")) << last;
  EXPECT_TRUE(absl::StrContains(last.message(), "sync step 0")) << last;
  EXPECT_EQ(wait_status.code(), absl::StatusCode::kInvalidArgument) << wait_status;
  int64_t version = -1;
  auto after = PullKeys(*store, "s/part_0", keys, -1, &version);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(version, 0);
  EXPECT_EQ(*after, *before);
  // A re-run of replica 0's step: refused the same way (the chief counts the attempts).
  const absl::Status rerun = PushKeys(*store, "s/part_0", keys, g, 2, 0, 0);
  EXPECT_EQ(rerun.code(), absl::StatusCode::kInvalidArgument) << rerun;
  // A later pull for the next version fails at once instead of waiting for its timeout.
  store->PullRows(wait, &waited, [&](const absl::Status& s) { wait_status = s; });
  EXPECT_EQ(wait_status.code(), absl::StatusCode::kInvalidArgument) << wait_status;
}

// A shard added to a running table (a ps added live) starts empty, at the version and the
// routing version of the table's other shards: its next SYNC step is theirs, and pushes routed
// by an older layout are refused. A dense shard cannot be started so; nothing is created then.
TEST(ShardStoreDynamicTest, AShardAddedToARunningTableStartsWhereTheTableIs) {
  auto store = *ShardStore::Create({});
  CreateShardsRequest request;
  *request.add_shards() =
      DynamicShard("emb", 2, 3, kBuckets, kBuckets, OptimizerSpec::ADAGRAD, /*sync=*/1);
  request.set_start_version(40);
  request.set_routing_version(7);
  CreateShardsResponse created;
  ASSERT_TRUE(store->CreateShards(request, &created).ok());
  EXPECT_EQ(created.created(), 1);
  auto listed = [&] {
    ListShardsResponse response;
    EXPECT_TRUE(store->ListShards(ListShardsRequest(), &response).ok());
    return response;
  };
  ListShardsResponse now = listed();
  ASSERT_EQ(now.shards_size(), 1);
  EXPECT_EQ(now.shards(0).version(), 40);
  EXPECT_EQ(now.shards(0).routing_version(), 7);
  EXPECT_EQ(now.shards(0).spec().dynamic().bucket_begin(), kBuckets);
  EXPECT_EQ(now.shards(0).spec().dynamic().bucket_end(), kBuckets);

  // The table's next sync step is 40: an empty share of it routed by the table's layout
  // applies; one routed by an older layout is refused.
  PushRowsRequest push;
  push.set_request_id(1);
  push.set_shard("emb/part_2");
  push.mutable_sync()->set_replica(0);
  push.mutable_sync()->set_step(40);
  PushRowsResponse pushed;
  push.set_routing_version(6);
  absl::Status s = store->PushRows(push, &pushed);
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted) << s;
  EXPECT_EQ(listed().shards(0).version(), 40);
  push.set_routing_version(7);
  s = store->PushRows(push, &pushed);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(listed().shards(0).version(), 41);
  push.mutable_sync()->set_step(42);
  push.set_request_id(2);
  EXPECT_EQ(store->PushRows(push, &pushed).code(), absl::StatusCode::kFailedPrecondition);

  // Created again (a retried call): left as it is.
  ASSERT_TRUE(store->CreateShards(request, &created).ok());
  EXPECT_EQ(created.created(), 0);
  EXPECT_EQ(listed().shards(0).version(), 41);

  CreateShardsRequest dense;
  ShardSpec spec = DynamicShard("w", 0, 1, 0, kBuckets);
  spec.clear_dynamic();
  spec.mutable_shape()->set_dim(0, 8);
  spec.mutable_full_shape()->set_dim(0, 8);
  *dense.add_shards() = spec;
  dense.set_start_version(3);
  s = store->CreateShards(dense, &created);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "'w' is dense")) << s;
  dense.set_start_version(-1);
  s = store->CreateShards(dense, &created);
  EXPECT_TRUE(absl::StrContains(s.message(), "must be >= 0")) << s;
  EXPECT_EQ(listed().shards_size(), 1);
}

}  // namespace
}  // namespace shardps
