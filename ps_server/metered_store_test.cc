// Tests of the metered store: its counters, latency histograms and scrape-time gauges move as
// a real ShardStore serves pulls and pushes.
#include "ps_server/metered_store.h"

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<ShardStore> NewStore(metrics::Registry* registry) {
  absl::StatusOr<std::unique_ptr<ShardStore>> store = ShardStore::Create(ShardStore::Options());
  EXPECT_TRUE(store.ok()) << store.status();
  absl::StatusOr<std::unique_ptr<ShardStore>> metered =
      NewMeteredStore(*std::move(store), registry);
  EXPECT_TRUE(metered.ok()) << metered.status();
  return *std::move(metered);
}

void Create(ShardStore* store, const std::string& variable, int parts, int64_t rows) {
  CreateShardsRequest request;
  request.set_request_id(1);
  for (int p = 0; p < parts; ++p) {
    ShardSpec* spec = request.add_shards();
    spec->set_name(parts == 1 ? variable : variable + "/part_" + std::to_string(p));
    spec->set_variable(variable);
    spec->set_part(p);
    spec->set_num_parts(parts);
    spec->set_row_offset(p * rows);
    spec->mutable_shape()->add_dim(rows);
    spec->mutable_shape()->add_dim(4);
    spec->mutable_full_shape()->add_dim(rows * parts);
    spec->mutable_full_shape()->add_dim(4);
    spec->mutable_optimizer()->set_type(OptimizerSpec::SGD);
    spec->mutable_optimizer()->set_learning_rate(1);
    spec->mutable_initializer()->set_type(InitializerSpec::CONSTANT);
  }
  CreateShardsResponse response;
  ASSERT_TRUE(store->CreateShards(request, &response).ok());
}

absl::Status Push(ShardStore* store, const std::string& shard, uint64_t id, int floats,
                  int64_t base_version = 0) {
  PushRequest request;
  request.set_request_id(id);
  request.set_base_version(base_version);
  request.set_shard(shard);
  request.set_data(std::string(floats * sizeof(float), '\0'));
  PushResponse response;
  return store->Push(request, &response);
}

absl::Status Pull(ShardStore* store, const std::string& shard) {
  PullRequest request;
  request.set_shard(shard);
  PullResponse response;
  absl::Status status = absl::UnknownError("not done");
  store->Pull(request, &response, [&status](const absl::Status& s) { status = s; });
  return status;
}

TEST(MeteredStoreTest, VariableOfShard) {
  EXPECT_EQ(VariableOfShard("emb/part_3"), "emb");
  EXPECT_EQ(VariableOfShard("dense/w"), "dense/w");
  EXPECT_EQ(VariableOfShard("x/part_"), "x/part_");
  EXPECT_EQ(VariableOfShard("x/part_1a"), "x/part_1a");
}

TEST(MeteredStoreTest, CountsPerVariableAcrossItsShards) {
  metrics::Registry registry;
  std::unique_ptr<ShardStore> store = NewStore(&registry);
  Create(store.get(), "emb", 2, 5);
  Create(store.get(), "w", 1, 3);
  ASSERT_TRUE(Push(store.get(), "emb/part_0", 10, 20).ok());
  ASSERT_TRUE(Push(store.get(), "emb/part_1", 11, 20).ok());
  EXPECT_FALSE(Push(store.get(), "w", 12, 5).ok());  // wrong size: rejected
  std::thread other([&] { EXPECT_TRUE(Push(store.get(), "w", 13, 12).ok()); });
  other.join();
  ASSERT_TRUE(Pull(store.get(), "w").ok());
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("shardps_ps_pushes_total{variable=\"emb\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_pushes_total{variable=\"w\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_updates_applied_total{variable=\"w\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_updates_rejected_total{variable=\"w\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_pulls_total{variable=\"w\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_request_seconds_count{rpc=\"Push\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_request_seconds_count{rpc=\"Pull\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_variable_rows{variable=\"emb\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_variable_version{variable=\"emb\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_variable_bytes{variable=\"w\"} "));
  EXPECT_THAT(text, HasSubstr("shardps_ps_shards 3\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_memory_used_bytes "));
}

TEST(MeteredStoreTest, StalenessCountsTheUpdatesBetweenBaseAndPush) {
  metrics::Registry registry;
  std::unique_ptr<ShardStore> store = NewStore(&registry);
  Create(store.get(), "w", 1, 3);
  ASSERT_TRUE(Push(store.get(), "w", 1, 12).ok());                      // version 1, unknown
  ASSERT_TRUE(Push(store.get(), "w", 2, 12, /*base_version=*/1).ok());  // version 2: fresh
  ASSERT_TRUE(Push(store.get(), "w", 3, 12).ok());                      // version 3
  ASSERT_TRUE(Push(store.get(), "w", 4, 12).ok());                      // version 4
  ASSERT_TRUE(Push(store.get(), "w", 5, 12, /*base_version=*/2).ok());  // version 5: 2 between
  const std::string text = registry.Render();
  EXPECT_THAT(text, HasSubstr("shardps_ps_push_staleness_count{variable=\"w\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_push_staleness_sum{variable=\"w\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("shardps_ps_push_staleness_bucket{variable=\"w\",le=\"0\"} 1\n"));
}

TEST(MeteredStoreTest, AStoreAfterAnotherOnTheSameThreadCountsItsOwn) {
  metrics::Registry first_registry;
  {
    std::unique_ptr<ShardStore> first = NewStore(&first_registry);
    Create(first.get(), "w", 1, 3);
    ASSERT_TRUE(Push(first.get(), "w", 1, 12).ok());
  }
  metrics::Registry registry;
  std::unique_ptr<ShardStore> second = NewStore(&registry);
  Create(second.get(), "w", 1, 3);
  ASSERT_TRUE(Push(second.get(), "w", 1, 12).ok());
  EXPECT_THAT(registry.Render(), HasSubstr("shardps_ps_pushes_total{variable=\"w\"} 1\n"));
}

}  // namespace
}  // namespace shardps
