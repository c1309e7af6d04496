// A 1 GiB variable round-trips through 2 ps daemons: nothing is bounded by gRPC's 4 MB
// default message limit or protobuf's 2 GB one.
#include <cstring>

#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "tests/ps_cluster.h"

namespace shardps {
namespace testing {
namespace {

TEST(LargeVariableTest, OneGibRoundTrips) {
  auto cluster = PsCluster::Start(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = *(*cluster)->NewClient();
  const int64_t rows = 262144, cols = 1024;  // 2^28 floats = 1 GiB
  VariableDef def;
  def.name = "huge";
  def.shape = {rows, cols};
  def.optimizer.set_type(OptimizerSpec::SGD);
  def.optimizer.set_learning_rate(1.0);
  auto placer = *NewRoundRobinPlacer(2);
  ASSERT_TRUE(client->CreateVariables({def}, **NewFixedShardsPartitioner(2), placer.get()).ok());
  std::vector<float> values(rows * cols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 100003);
  ASSERT_TRUE(client->Assign("huge", values).ok());
  std::vector<float> back(values.size());
  ASSERT_TRUE(client->Pull("huge", absl::MakeSpan(back)).ok());
  EXPECT_EQ(0, std::memcmp(values.data(), back.data(), values.size() * sizeof(float)));
  // A push of the whole variable (lr 1, gradient 1) moves every element by exactly -1.
  std::fill(back.begin(), back.end(), 1.0f);
  ASSERT_TRUE(client->Push("huge", back).ok());
  ASSERT_TRUE(client->Pull("huge", absl::MakeSpan(back)).ok());
  for (size_t i = 0; i < values.size(); i += 4099) ASSERT_EQ(back[i], values[i] - 1.0f) << i;
}

}  // namespace
}  // namespace testing
}  // namespace shardps
