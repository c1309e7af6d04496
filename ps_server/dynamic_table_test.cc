#include "ps_server/dynamic_table.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

constexpr int64_t kDim = 4;

OptimizerSpec Spec(OptimizerSpec::Type type, double lr = 0.1) {
  OptimizerSpec spec;
  spec.set_type(type);
  spec.set_learning_rate(lr);
  return spec;
}

std::unique_ptr<Optimizer> MakeOptimizer(OptimizerSpec::Type type, double lr = 0.1) {
  auto opt = Optimizer::Create(Spec(type, lr));
  EXPECT_TRUE(opt.ok()) << opt.status();
  return *std::move(opt);
}

DynamicTableOptions Options(const std::string& name = "emb") {
  DynamicTableOptions o;
  o.name = name;
  o.dim = kDim;
  o.initializer.set_type(InitializerSpec::RANDOM_NORMAL);
  o.initializer.set_seed(11);
  o.num_buckets = 256;
  o.num_stripes = 8;
  return o;
}

std::unique_ptr<DynamicTable> Make(const DynamicTableOptions& o, const Optimizer& opt) {
  auto t = DynamicTable::Create(o, opt);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

std::vector<float> PullRows(const DynamicTable& t, const std::vector<int64_t>& keys) {
  std::vector<float> out(keys.size() * t.dim());
  const absl::Status s = t.Pull(keys, absl::MakeSpan(out));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> Grads(size_t rows, float base = 0.5f) {
  std::vector<float> g(rows * kDim);
  for (size_t i = 0; i < g.size(); ++i) g[i] = base + 0.25f * std::sin(1.0f + i);
  return g;
}

TEST(DynamicTableTest, PullOfMissingKeyReadsInitialValueAndCreatesNothing) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAGRAD);
  auto table = Make(Options(), *opt);
  const std::vector<int64_t> keys = {5, -7, int64_t{1} << 60};
  const std::vector<float> first = PullRows(*table, keys);
  const std::vector<float> again = PullRows(*table, keys);
  EXPECT_EQ(first, again);
  EXPECT_EQ(table->size(), 0);
  EXPECT_EQ(table->stats().created, 0);
  // The initial value is the initializer's, not zeros.
  auto init = KeyedRowInitializer::Create(Options().initializer, "emb", kDim);
  ASSERT_TRUE(init.ok());
  std::vector<float> want(kDim);
  init->Fill(-7, want.data());
  EXPECT_EQ(std::vector<float>(first.begin() + kDim, first.begin() + 2 * kDim), want);
  EXPECT_NE(want, std::vector<float>(kDim, 0.0f));
}

TEST(DynamicTableTest, FirstPushCreatesTheRowFromItsInitialValue) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD, 1.0);
  auto table = Make(Options(), *opt);
  const std::vector<float> before = PullRows(*table, {42});
  const std::vector<float> g = Grads(1);
  auto r = table->Push({42}, g, *opt, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->created, 1);
  EXPECT_EQ(r->applied, 1);
  EXPECT_EQ(table->size(), 1);
  const std::vector<float> after = PullRows(*table, {42});
  for (int c = 0; c < kDim; ++c) EXPECT_EQ(after[c], before[c] - g[c]);
  // A second push updates it, creates nothing.
  r = table->Push({42}, g, *opt, 2);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->created, 0);
  EXPECT_EQ(table->stats().created, 1);
}

// Two ps (or one ps before and after re-sharding) with the same (seed, table) compute the
// same initial rows whatever their layout (stripes, buckets held).
TEST(DynamicTableTest, IdenticalInitialRowsAcrossTablesAndLayouts) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAGRAD);
  DynamicTableOptions a = Options(), b = Options();
  b.num_stripes = 1;
  b.num_buckets = 7;
  auto ta = Make(a, *opt);
  auto tb = Make(b, *opt);
  std::vector<int64_t> keys;
  for (int64_t k = -50; k < 50; ++k) keys.push_back(k * 977);
  EXPECT_EQ(PullRows(*ta, keys), PullRows(*tb, keys));
  const std::vector<float> g = Grads(keys.size());
  ASSERT_TRUE(ta->Push(keys, g, *opt, 1).ok());
  ASSERT_TRUE(tb->Push(keys, g, *opt, 1).ok());
  EXPECT_EQ(PullRows(*ta, keys), PullRows(*tb, keys));
  // Another table name gives other rows.
  auto other = Make(Options("other"), *opt);
  EXPECT_NE(PullRows(*other, {1}), PullRows(*Make(Options(), *opt), {1}));
}

// Row updates equal the optimizer's on a dense buffer holding the same rows, with duplicate
// keys summed first.
TEST(DynamicTableTest, MatchesDenseOptimizerWithDuplicatesSummed) {
  for (auto type : {OptimizerSpec::ADAGRAD, OptimizerSpec::ADAM, OptimizerSpec::FTRL}) {
    SCOPED_TRACE(type);
    auto opt = MakeOptimizer(type, 0.05);
    auto table = Make(Options(), *opt);
    const std::vector<int64_t> distinct = {3, 1000003, -8};
    std::vector<float> dense = PullRows(*table, distinct);
    std::vector<std::vector<float>> slots;
    for (int s = 0; s < opt->num_slots(); ++s) {
      slots.emplace_back(dense.size(), opt->initial_slot_value(s));
    }
    std::vector<float*> slot_ptrs;
    for (auto& v : slots) slot_ptrs.push_back(v.data());
    for (int t = 1; t <= 4; ++t) {
      // Keys 3 and -8 appear twice.
      const std::vector<int64_t> keys = {3, -8, 1000003, 3, -8};
      const std::vector<float> g = Grads(keys.size(), 0.1f * t);
      ASSERT_TRUE(table->Push(keys, g, *opt, t).ok());
      std::vector<float> summed(distinct.size() * kDim, 0.0f);
      for (size_t k = 0; k < keys.size(); ++k) {
        const size_t d = std::find(distinct.begin(), distinct.end(), keys[k]) - distinct.begin();
        for (int c = 0; c < kDim; ++c) summed[d * kDim + c] += g[k * kDim + c];
      }
      opt->ApplyDense(t, summed, dense.data(), slot_ptrs);
    }
    EXPECT_EQ(PullRows(*table, distinct), dense);
    // Slots too, through an export of every bucket.
    auto all = table->ExportBuckets(table->HeldBuckets());
    ASSERT_TRUE(all.ok());
    ASSERT_EQ(all->keys.size(), distinct.size());
    const int64_t width = kDim * (1 + opt->num_slots());
    for (size_t k = 0; k < all->keys.size(); ++k) {
      const size_t d = std::find(distinct.begin(), distinct.end(), all->keys[k]) - distinct.begin();
      for (int s = 0; s < opt->num_slots(); ++s) {
        for (int c = 0; c < kDim; ++c) {
          EXPECT_EQ(all->values[k * width + (s + 1) * kDim + c], slots[s][d * kDim + c]);
        }
      }
    }
  }
}

TEST(DynamicTableTest, AdmissionAfterKPushes) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD, 1.0);
  DynamicTableOptions o = Options();
  o.admit_after = 3;
  o.admission_sketch_bytes = 1 << 16;
  auto table = Make(o, *opt);
  const std::vector<float> initial = PullRows(*table, {77});
  const std::vector<float> g = Grads(1);
  for (int t = 1; t <= 2; ++t) {
    auto r = table->Push({77}, g, *opt, t);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->denied, 1);
    EXPECT_EQ(r->created, 0);
    EXPECT_EQ(table->size(), 0);
    EXPECT_EQ(PullRows(*table, {77}), initial);  // gradient dropped
  }
  auto r = table->Push({77}, g, *opt, 3);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->created, 1);
  EXPECT_EQ(table->size(), 1);
  const std::vector<float> after = PullRows(*table, {77});
  for (int c = 0; c < kDim; ++c) EXPECT_EQ(after[c], initial[c] - g[c]);  // the K-th applies
  EXPECT_EQ(table->stats().admission_denied, 2);
  // Duplicates within one push count once.
  r = table->Push({90, 90, 90}, Grads(3), *opt, 4);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->denied, 1);
  EXPECT_EQ(table->size(), 1);
}

TEST(DynamicTableTest, EvictsRowsNotPushedForTtlSteps) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD);
  DynamicTableOptions o = Options();
  o.num_stripes = 1;  // one stripe sees every step
  o.ttl_steps = 8;
  auto table = Make(o, *opt);
  ASSERT_TRUE(table->Push({1, 2}, Grads(2), *opt, 1).ok());
  for (int64_t t = 2; t <= 20; ++t) ASSERT_TRUE(table->Push({2}, Grads(1), *opt, t).ok());
  // Key 1 (last pushed at 1) went at a sweep once the newest step passed 1 + 8; key 2 stays.
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(table->stats().evicted_ttl, 1);
  EXPECT_EQ(PullRows(*table, {1}), PullRows(*Make(o, *opt), {1}));  // back to initial
  auto deleted = table->DeletedSince(0);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, std::vector<int64_t>{1});
  // EvictExpired sweeps everything older than now - ttl.
  EXPECT_EQ(table->EvictExpired(20 + 8), 0);
  EXPECT_EQ(table->EvictExpired(20 + 9), 1);
  EXPECT_EQ(table->size(), 0);
}

// Push(..., evicted) hands over each row it evicts as it was: key, last step, parameters
// and slots.
TEST(DynamicTableTest, APushReportsTheRowsItEvicts) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAGRAD);
  DynamicTableOptions o = Options();
  o.num_stripes = 1;
  o.ttl_steps = 2;
  auto table = Make(o, *opt);
  ASSERT_TRUE(table->Push({1, 2}, Grads(2), *opt, 1).ok());
  ASSERT_TRUE(table->Push({2}, Grads(1), *opt, 2).ok());
  auto before = table->ExportBuckets(table->HeldBuckets());
  ASSERT_TRUE(before.ok());
  RowBatch evicted;
  ASSERT_TRUE(table->Push({3}, Grads(1), *opt, 4, 1.0, &evicted).ok());
  ASSERT_EQ(evicted.keys, std::vector<int64_t>{1}) << "key 1, last pushed at step 1, expired";
  ASSERT_EQ(evicted.last_steps.size(), 1u);
  const int64_t floats = o.dim * (1 + opt->num_slots());
  ASSERT_EQ(evicted.values.size(), static_cast<size_t>(floats));
  bool found = false;
  for (size_t r = 0; r < before->keys.size(); ++r) {
    if (before->keys[r] != 1) continue;
    found = true;
    EXPECT_EQ(evicted.last_steps[0], before->last_steps[r]);
    EXPECT_EQ(evicted.values, std::vector<float>(before->values.begin() + r * floats,
                                                 before->values.begin() + (r + 1) * floats));
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(table->size(), 2);  // keys 2 and 3
}

TEST(DynamicTableTest, RowBudgetEvictsLeastRecentlyPushed) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAGRAD);
  DynamicTableOptions o = Options();
  o.num_stripes = 4;
  o.max_rows = 1000;
  auto table = Make(o, *opt);
  // 5000 keys, 50 a step; key k is pushed at step k / 50 + 1.
  for (int64_t step = 1; step <= 100; ++step) {
    std::vector<int64_t> keys;
    for (int64_t k = (step - 1) * 50; k < step * 50; ++k) keys.push_back(k);
    ASSERT_TRUE(table->Push(keys, Grads(keys.size()), *opt, step).ok());
    ASSERT_LE(table->size(), 1000 + 50) << "step " << step;  // at most one push over
  }
  const DynamicTableStats stats = table->stats();
  EXPECT_EQ(stats.created, 5000);
  EXPECT_EQ(stats.rows, table->size());
  EXPECT_EQ(stats.created - stats.evicted_budget, stats.rows);
  // The newest keys survive, the oldest are gone (approximate LRU).
  auto rows = table->ExportBuckets(table->HeldBuckets());
  ASSERT_TRUE(rows.ok());
  int64_t oldest = 5000;
  for (int64_t k : rows->keys) oldest = std::min(oldest, k);
  EXPECT_GE(oldest, 5000 - 1200);
  for (int64_t k = 4950; k < 5000; ++k) {
    EXPECT_NE(std::find(rows->keys.begin(), rows->keys.end(), k), rows->keys.end()) << k;
  }
}

TEST(DynamicTableTest, BucketExportImportRoundTrip) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAM);
  DynamicTableOptions o = Options();
  auto source = Make(o, *opt);
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 400; ++k) keys.push_back(k * 7919 - 1000);
  ASSERT_TRUE(source->Push(keys, Grads(keys.size()), *opt, 1).ok());
  ASSERT_TRUE(source->Push(keys, Grads(keys.size(), -0.3f), *opt, 2).ok());

  // Move the first half of the buckets to a table that holds none of them.
  std::vector<int32_t> moving;
  for (int32_t b = 0; b < o.num_buckets / 2; ++b) moving.push_back(b);
  DynamicTableOptions d = o;
  d.all_buckets = false;  // holds none yet
  auto dest = Make(d, *opt);
  std::vector<float> probe(kDim);
  EXPECT_EQ(dest->Pull({keys[0]}, absl::MakeSpan(probe)).code(),
            absl::StatusCode::kFailedPrecondition);
  auto batch = source->ExportBuckets(moving);
  ASSERT_TRUE(batch.ok());
  EXPECT_GT(batch->keys.size(), 100u);
  EXPECT_LT(batch->keys.size(), 300u);
  // Importing a bucket already held is refused, and changes nothing.
  std::vector<int32_t> wrong = moving;
  wrong.push_back(o.num_buckets - 1);
  EXPECT_EQ(source->ImportBuckets(wrong, *batch).code(), absl::StatusCode::kFailedPrecondition);
  // Rows outside the buckets imported are refused, and change nothing.
  EXPECT_EQ(dest->ImportBuckets({0}, *batch).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(dest->size(), 0);
  EXPECT_FALSE(dest->HoldsBucket(0));
  ASSERT_TRUE(dest->ImportBuckets(moving, *batch).ok());
  ASSERT_TRUE(source->DropBuckets(moving).ok());
  EXPECT_EQ(source->size() + dest->size(), static_cast<int64_t>(keys.size()));
  // Every key reads the same from the table that holds it now; pushes continue identically.
  auto reference = Make(o, *opt);
  ASSERT_TRUE(reference->Push(keys, Grads(keys.size()), *opt, 1).ok());
  ASSERT_TRUE(reference->Push(keys, Grads(keys.size(), -0.3f), *opt, 2).ok());
  for (int64_t k : keys) {
    DynamicTable* holder = dest->HoldsBucket(BucketOf(k, o.num_buckets)) ? dest.get() : source.get();
    EXPECT_FALSE(source->HoldsBucket(BucketOf(k, o.num_buckets)) &&
                 dest->HoldsBucket(BucketOf(k, o.num_buckets)));
    ASSERT_TRUE(holder->Push({k}, Grads(1), *opt, 3).ok());
    ASSERT_TRUE(reference->Push({k}, Grads(1), *opt, 3).ok());
    EXPECT_EQ(PullRows(*holder, {k}), PullRows(*reference, {k})) << k;
  }
  // The source refuses the buckets it gave away.
  const int64_t moved_key = batch->keys[0];
  EXPECT_EQ(source->Push({moved_key}, Grads(1), *opt, 4).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(source->DropBuckets(moving).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(DynamicTableTest, ImportRefusesKeysOutsideItsBuckets) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD);
  DynamicTableOptions o = Options();
  o.all_buckets = false;
  auto table = Make(o, *opt);
  RowBatch batch;
  int64_t k = 0;
  while (BucketOf(k, o.num_buckets) == 3) ++k;
  batch.keys = {k};
  batch.last_steps = {1};
  batch.values.assign(kDim, 0.5f);
  const absl::Status s = table->ImportBuckets({3}, batch);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("key " + std::to_string(k)), std::string::npos) << s;
  EXPECT_FALSE(table->HoldsBucket(3));
  batch.values.pop_back();
  EXPECT_EQ(table->ImportBuckets({3}, batch).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DynamicTableTest, ChangedSinceEpochAndDeletions) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAGRAD);
  DynamicTableOptions o = Options();
  auto table = Make(o, *opt);
  ASSERT_TRUE(table->Push({1, 2, 3}, Grads(3), *opt, 1).ok());
  const uint32_t e1 = table->AdvanceEpoch();  // a checkpoint closes epoch 1
  EXPECT_EQ(e1, 1u);
  ASSERT_TRUE(table->Push({2, 4}, Grads(2), *opt, 2).ok());
  ASSERT_TRUE(table->EraseKeys({3}).ok());

  auto collect = [&](uint32_t since) {
    std::map<int64_t, std::vector<float>> rows;
    EXPECT_TRUE(table
                    ->ForEachChangedBatch(since,
                                          [&](const RowBatch& b) {
                                            const int64_t w = kDim * 2;
                                            for (size_t k = 0; k < b.keys.size(); ++k) {
                                              rows[b.keys[k]].assign(
                                                  b.values.begin() + k * w,
                                                  b.values.begin() + (k + 1) * w);
                                            }
                                            return absl::OkStatus();
                                          })
                    .ok());
    return rows;
  };
  const auto full = collect(0);
  EXPECT_EQ(full.size(), 3u);  // 1, 2, 4
  const auto incremental = collect(e1);
  ASSERT_EQ(incremental.size(), 2u);
  EXPECT_TRUE(incremental.count(2) && incremental.count(4));
  auto deleted = table->DeletedSince(e1);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, std::vector<int64_t>{3});

  // Restore: a table from the full export of epoch 1's state plus the increment equals this one.
  const uint32_t e2 = table->AdvanceEpoch();
  EXPECT_TRUE(collect(e2).empty());
  table->ForgetDeletionsThrough(e2);
  EXPECT_TRUE(table->DeletedSince(e1)->empty());

  // A sink's error stops the iteration and comes back.
  EXPECT_EQ(table->ForEachChangedBatch(0, [](const RowBatch&) {
                    return absl::DataLossError("disk full");
                  }).code(),
            absl::StatusCode::kDataLoss);
}

TEST(DynamicTableTest, IncrementalRestoreReproducesTheTable) {
  auto opt = MakeOptimizer(OptimizerSpec::FTRL);
  DynamicTableOptions o = Options();
  o.num_stripes = 2;
  o.ttl_steps = 4;
  auto table = Make(o, *opt);
  auto restored = Make(o, *opt);
  uint32_t since = 0;
  std::mt19937_64 rng(3);
  for (int64_t step = 1; step <= 40; ++step) {
    std::vector<int64_t> keys;
    for (int i = 0; i < 20; ++i) keys.push_back(static_cast<int64_t>(rng() % 100));
    ASSERT_TRUE(table->Push(keys, Grads(keys.size(), 0.01f * step), *opt, step).ok());
    if (step % 5 == 0) {  // a checkpoint: deletions, then rows
      const uint32_t closed = table->AdvanceEpoch();
      auto deleted = table->DeletedSince(since);
      ASSERT_TRUE(deleted.ok()) << deleted.status();
      ASSERT_TRUE(restored->EraseKeys(*deleted).ok());
      ASSERT_TRUE(table->ForEachChangedBatch(since, [&](const RowBatch& b) {
                           return restored->UpsertRows(b);
                         }).ok());
      table->ForgetDeletionsThrough(closed);
      since = closed;
    }
  }
  EXPECT_GT(table->stats().evicted_ttl, 0);
  EXPECT_EQ(restored->size(), table->size());
  auto a = table->ExportBuckets(table->HeldBuckets());
  ASSERT_TRUE(a.ok());
  std::vector<int64_t> keys = a->keys;
  std::sort(keys.begin(), keys.end());
  auto b = restored->ExportBuckets(restored->HeldBuckets());
  std::vector<int64_t> keys_b = b->keys;
  std::sort(keys_b.begin(), keys_b.end());
  EXPECT_EQ(keys, keys_b);
  EXPECT_EQ(PullRows(*table, keys), PullRows(*restored, keys));
}

TEST(DynamicTableTest, DeletionLogOverflowAsksForAFullCheckpoint) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD);
  DynamicTableOptions o = Options();
  o.num_stripes = 1;
  o.max_logged_deletions = 4;
  auto table = Make(o, *opt);
  std::vector<int64_t> keys = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(table->Push(keys, Grads(keys.size()), *opt, 1).ok());
  const uint32_t e = table->AdvanceEpoch();
  ASSERT_TRUE(table->EraseKeys(keys).ok());
  auto deleted = table->DeletedSince(e - 1);
  EXPECT_EQ(deleted.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(deleted.status().message().find("full"), std::string::npos);
}

TEST(DynamicTableTest, BadInputChangesNothing) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAGRAD);
  DynamicTableOptions o = Options();
  o.all_buckets = false;
  o.buckets = {BucketOf(10, o.num_buckets), BucketOf(11, o.num_buckets)};
  auto table = Make(o, *opt);
  ASSERT_TRUE(table->Push({10}, Grads(1), *opt, 1).ok());
  const std::vector<float> before = PullRows(*table, {10, 11});

  std::vector<float> g = Grads(2);
  auto r = table->Push({10, 11}, absl::MakeConstSpan(g.data(), kDim * 2 - 1), *opt, 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  g[kDim + 2] = NAN;
  r = table->Push({10, 11}, g, *opt, 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("key 11 (position 1)"), std::string::npos) << r.status();
  g = Grads(2);
  EXPECT_EQ(table->Push({10, 11}, g, *opt, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->Push({10, 11}, g, *opt, 2, 0.0).status().code(),
            absl::StatusCode::kInvalidArgument);
  int64_t outside = 0;
  while (table->HoldsBucket(BucketOf(outside, o.num_buckets))) ++outside;
  r = table->Push({10, outside}, g, *opt, 2);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("key " + std::to_string(outside) + " (position 1)"),
            std::string::npos)
      << r.status();
  auto sgd = MakeOptimizer(OptimizerSpec::SGD);
  EXPECT_EQ(table->Push({10}, Grads(1), *sgd, 2).status().code(),
            absl::StatusCode::kInvalidArgument);
  std::vector<float> small(kDim);
  EXPECT_EQ(table->Pull({10, 11}, absl::MakeSpan(small)).code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(PullRows(*table, {10, 11}), before);
  EXPECT_EQ(table->size(), 1);
  EXPECT_EQ(table->stats().created, 1);
}

TEST(DynamicTableTest, RejectsBadOptions) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD);
  auto expect = [&](DynamicTableOptions o, const std::string& field) {
    auto t = DynamicTable::Create(o, *opt);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_NE(t.status().message().find(field), std::string::npos) << t.status();
  };
  DynamicTableOptions o = Options();
  o.dim = 0;
  expect(o, "dim");
  o = Options();
  o.num_buckets = 0;
  expect(o, "num_buckets");
  o = Options();
  o.admit_after = 300;
  expect(o, "admit_after");
  o = Options();
  o.ttl_steps = -1;
  expect(o, "ttl_steps");
  o = Options();
  o.max_rows = -5;
  expect(o, "max_rows");
  o = Options();
  o.buckets = {256};
  expect(o, "bucket 256");
  o = Options();
  o.initializer.set_type(InitializerSpec::GLOROT_UNIFORM);
  expect(o, "GLOROT_UNIFORM");
}

// The index against a reference map through many inserts and erases (growth, backward-shift
// deletion across the wrap-around).
TEST(DynamicTableTest, IndexAgreesWithReferenceUnderChurn) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD);
  DynamicTableOptions o = Options();
  o.num_stripes = 1;
  o.initializer.set_type(InitializerSpec::ZEROS);
  auto table = Make(o, *opt);
  std::map<int64_t, float> reference;
  std::mt19937_64 rng(5);
  for (int round = 0; round < 60; ++round) {
    RowBatch batch;
    std::vector<int64_t> erase;
    for (int i = 0; i < 200; ++i) {
      const int64_t key = static_cast<int64_t>(rng() % 3000);
      if (rng() % 3 == 0) {
        if (std::find(batch.keys.begin(), batch.keys.end(), key) != batch.keys.end()) continue;
        erase.push_back(key);
      } else {
        if (std::find(batch.keys.begin(), batch.keys.end(), key) != batch.keys.end() ||
            std::find(erase.begin(), erase.end(), key) != erase.end()) {
          continue;
        }
        const float v = static_cast<float>(round * 1000 + i);
        batch.keys.push_back(key);
        batch.last_steps.push_back(1);
        batch.values.insert(batch.values.end(), kDim, v);
      }
    }
    ASSERT_TRUE(table->EraseKeys(erase).ok());
    for (int64_t k : erase) reference.erase(k);
    ASSERT_TRUE(table->UpsertRows(batch).ok());
    for (size_t k = 0; k < batch.keys.size(); ++k) reference[batch.keys[k]] = batch.values[k * kDim];
    ASSERT_EQ(table->size(), static_cast<int64_t>(reference.size())) << "round " << round;
  }
  std::vector<int64_t> all;
  for (int64_t k = 0; k < 3000; ++k) all.push_back(k);
  const std::vector<float> got = PullRows(*table, all);
  for (int64_t k = 0; k < 3000; ++k) {
    auto it = reference.find(k);
    EXPECT_EQ(got[k * kDim], it == reference.end() ? 0.0f : it->second) << "key " << k;
  }
}

// Many threads pushing and pulling overlapping keys: every push is applied exactly once.
// SGD with lr 1 from zeros and gradients of 1 makes each row minus its push count, exactly.
TEST(DynamicTableTest, ConcurrentPushesAndPulls) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD, 1.0);
  DynamicTableOptions o = Options();
  o.initializer.set_type(InitializerSpec::ZEROS);
  auto table = Make(o, *opt);
  constexpr int kThreads = 8;
  constexpr int kPushes = 200;
  constexpr int kKeys = 64;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < kPushes; ++i) {
        std::vector<int64_t> keys = {static_cast<int64_t>(rng() % kKeys) * 1000003,
                                     static_cast<int64_t>(rng() % kKeys) * 1000003};
        if (keys[0] == keys[1]) keys.pop_back();
        std::vector<float> g(keys.size() * kDim, 1.0f);
        if (!table->Push(keys, g, *opt, i + 1).ok()) ++failures;
        std::vector<float> out(kKeys * kDim);
        std::vector<int64_t> all;
        for (int64_t k = 0; k < kKeys; ++k) all.push_back(k * 1000003);
        if (!table->Pull(all, absl::MakeSpan(out)).ok()) ++failures;
        for (int64_t r = 0; r < kKeys; ++r) {
          for (int c = 1; c < kDim; ++c) {
            if (out[r * kDim + c] != out[r * kDim]) ++failures;  // a torn row
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  std::vector<int64_t> all;
  for (int64_t k = 0; k < kKeys; ++k) all.push_back(k * 1000003);
  const std::vector<float> rows = PullRows(*table, all);
  // Recount the pushes per key from the same random sequences.
  std::vector<int> count(kKeys, 0);
  for (int t = 0; t < kThreads; ++t) {
    std::mt19937 rng(t);
    for (int i = 0; i < kPushes; ++i) {
      const int a = rng() % kKeys, b = rng() % kKeys;
      ++count[a];
      if (b != a) ++count[b];
    }
  }
  for (int k = 0; k < kKeys; ++k) EXPECT_EQ(rows[k * kDim], -count[k]) << "key " << k;
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// Issue 23 §5: a table without max_rows fed new keys grew past the ps' budget (1 GiB to
// 4 GiB RSS) with no error. Each row counts in the budget now: new keys past it are refused
// with RESOURCE_EXHAUSTED naming the table, nothing changes, keys that have rows still
// train, and the bytes come back as rows go (eviction, drops, the table's end).
TEST(DynamicTableBudgetTest, RowsCountInTheBudgetAndNewKeysPastItAreRefused) {
  auto opt = MakeOptimizer(OptimizerSpec::ADAM);
  MemoryBudget budget(/*budget_bytes=*/1 << 20, /*snapshot_reserve=*/0.5, /*ps_task=*/3);
  DynamicTableOptions o = Options();
  o.row_budget = &budget;
  o.budget_name = "variable 'emb' (shard 'emb/part_0')";
  o.ttl_steps = 1000;
  auto table = Make(o, *opt);
  const int64_t row_bytes = table->row_bytes();
  EXPECT_EQ(row_bytes, 4 * kDim * 3 + 8 + 24);  // Adam: two slots
  const int64_t fits = budget.limit_bytes() / row_bytes;
  int64_t next_key = 0;
  int64_t step = 1;
  // Pushes of 100 new keys until one is refused.
  absl::Status refused;
  while (refused.ok()) {
    ASSERT_LT(next_key, 2 * fits) << "the table grew past its budget";
    std::vector<int64_t> keys(100);
    for (int64_t& k : keys) k = next_key++;
    const int64_t available = budget.available_bytes();
    absl::StatusOr<DynamicPushResult> r = table->Push(keys, Grads(100), *opt, step++);
    if (!r.ok()) {
      refused = r.status();
      next_key -= 100;
    } else {
      // Health's figure falls as rows grow.
      EXPECT_EQ(budget.available_bytes(), available - 100 * row_bytes);
    }
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("variable 'emb' (shard 'emb/part_0')"), std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("max_rows"), std::string::npos) << refused;
  EXPECT_EQ(table->size(), next_key);
  EXPECT_GT(next_key, fits - 100);
  EXPECT_LE(next_key, fits);
  EXPECT_EQ(budget.used_bytes(), next_key * row_bytes);
  // Keys that have rows still train, new ones do not.
  const std::vector<int64_t> old_keys = {0, 1, 2};
  const std::vector<float> before = PullRows(*table, old_keys);
  ASSERT_TRUE(table->Push(old_keys, Grads(3), *opt, step++).ok());
  EXPECT_NE(PullRows(*table, old_keys), before);
  // One key at a time, the budget fills to its last row.
  while (table->Push({next_key}, Grads(1), *opt, step++).ok()) ++next_key;
  EXPECT_LT(budget.available_bytes(), row_bytes);
  EXPECT_EQ(table->size(), next_key);
  EXPECT_EQ(budget.used_bytes(), next_key * row_bytes);
  // Rows that go give their bytes back.
  ASSERT_TRUE(table->EraseKeys({0, 1, 2}).ok());
  EXPECT_EQ(budget.used_bytes(), (next_key - 3) * row_bytes);
  EXPECT_EQ(table->EvictExpired(step + 2000), next_key - 3);
  EXPECT_EQ(budget.used_bytes(), 0);
  ASSERT_TRUE(table->Push({1, 2, 3}, Grads(3), *opt, step + 2001).ok());
  EXPECT_EQ(budget.used_bytes(), 3 * row_bytes);
  table.reset();
  EXPECT_EQ(budget.used_bytes(), 0);
}

// A restore's rows count too: past the budget the restore is refused, nothing written.
TEST(DynamicTableBudgetTest, UpsertPastTheBudgetIsRefused) {
  auto opt = MakeOptimizer(OptimizerSpec::SGD);
  auto source = Make(Options(), *opt);
  std::vector<int64_t> keys(1000);
  for (size_t k = 0; k < keys.size(); ++k) keys[k] = static_cast<int64_t>(k);
  ASSERT_TRUE(source->Push(keys, Grads(keys.size()), *opt, 1).ok());
  absl::StatusOr<RowBatch> rows = source->ExportBuckets(source->HeldBuckets());
  ASSERT_TRUE(rows.ok()) << rows.status();
  MemoryBudget budget(/*budget_bytes=*/20000, /*snapshot_reserve=*/0, /*ps_task=*/0);
  DynamicTableOptions o = Options();
  o.row_budget = &budget;
  auto target = Make(o, *opt);
  const absl::Status s = target->UpsertRows(*rows);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("table 'emb'"), std::string::npos) << s;
  EXPECT_EQ(target->size(), 0);
  EXPECT_EQ(budget.used_bytes(), 0);
}

// A push that would overflow a row (an existing one, or a new one from its initial value) is
// refused naming the key, and changes nothing: no row made, none updated.
TEST(DynamicTableFiniteTest, AnUpdateThatWouldOverflowARowIsRefused) {
  for (OptimizerSpec::Type type : {OptimizerSpec::SGD, OptimizerSpec::MOMENTUM,
                                   OptimizerSpec::ADAM}) {
    SCOPED_TRACE(OptimizerSpec::Type_Name(type));
    auto opt = MakeOptimizer(type, 1.0);
    auto table = Make(Options(), *opt);
    const std::vector<int64_t> keys = {10, 20};
    std::vector<float> huge = Grads(2);
    for (int64_t c = 0; c < kDim; ++c) huge[kDim + c] = -3e38f;  // key 20
    absl::Status refused;
    int pushes = 0;
    std::vector<float> before;
    int64_t size_before = 0;
    for (; pushes < 40 && refused.ok(); ++pushes) {
      before = PullRows(*table, keys);
      size_before = table->size();
      refused = table->Push(keys, huge, *opt, pushes + 1).status();
    }
    ASSERT_FALSE(refused.ok()) << "40 pushes of -3e38 were all applied";
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(refused.message().find("key 20"), std::string::npos) << refused;
    EXPECT_EQ(PullRows(*table, keys), before);
    EXPECT_EQ(table->size(), size_before);
    for (float x : PullRows(*table, keys)) EXPECT_TRUE(std::isfinite(x));
  }
  // A new key's first push is checked from its initial value.
  auto adam = MakeOptimizer(OptimizerSpec::ADAM);
  auto table = Make(Options(), *adam);
  std::vector<float> g(kDim, 3e38f);
  EXPECT_EQ(table->Push({77}, g, *adam, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table->size(), 0);
}

}  // namespace
}  // namespace shardps
