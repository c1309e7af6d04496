#include "ps_server/shard_testing.h"

#include "gtest/gtest.h"
#include "ps_server/shard_spec_checks.h"

namespace shardps {

ShardSpec DenseTestSpec(const std::string& name, int64_t rows, int64_t width,
                        OptimizerSpec::Type optimizer, int sync_replicas,
                        const std::string& variable) {
  ShardSpec s;
  s.set_name(name);
  s.set_variable(variable);
  s.set_num_parts(1);
  for (int64_t d : {rows, width}) {
    s.mutable_shape()->add_dim(d);
    s.mutable_full_shape()->add_dim(d);
  }
  s.mutable_initializer()->set_type(InitializerSpec::CONSTANT);
  s.mutable_initializer()->set_value(1.0);
  s.mutable_optimizer()->set_type(optimizer);
  s.mutable_optimizer()->set_learning_rate(0.5);
  if (sync_replicas > 0) {
    s.mutable_update()->set_mode(UpdateSpec::SYNC);
    s.mutable_update()->set_num_replicas(sync_replicas);
  }
  return s;
}

ShardSpec DynamicTestSpec(const std::string& name, int64_t dim, int num_buckets) {
  ShardSpec s;
  s.set_name(name);
  s.set_variable(name);
  s.set_num_parts(1);
  for (int64_t d : {int64_t{0}, dim}) {
    s.mutable_shape()->add_dim(d);
    s.mutable_full_shape()->add_dim(d);
  }
  s.mutable_initializer()->set_type(InitializerSpec::CONSTANT);
  s.mutable_initializer()->set_value(1.0);
  s.mutable_optimizer()->set_type(OptimizerSpec::ADAGRAD);
  s.mutable_optimizer()->set_learning_rate(0.5);
  DynamicSpec* d = s.mutable_dynamic();
  d->set_num_buckets(num_buckets);
  d->set_bucket_begin(0);
  d->set_bucket_end(num_buckets);
  return s;
}

std::shared_ptr<Shard> MakeTestShard(const ShardSpec& spec) {
  absl::StatusOr<Geometry> geometry = ValidateShardSpec(spec);
  EXPECT_TRUE(geometry.ok()) << geometry.status();
  if (!geometry.ok()) return nullptr;
  absl::StatusOr<std::shared_ptr<Shard>> shard = Shard::Create(spec, *geometry, 16);
  EXPECT_TRUE(shard.ok()) << shard.status();
  if (!shard.ok()) return nullptr;
  return *std::move(shard);
}

}  // namespace shardps
