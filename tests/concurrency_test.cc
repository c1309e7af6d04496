// 8 client processes push concurrently to a variable on 2 ps daemons: no update is lost.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "tests/ps_cluster.h"
#include "tests/test_gradients.h"

namespace shardps {
namespace testing {
namespace {

TEST(ConcurrencyTest, EightClientProcessesLoseNoUpdate) {
  auto cluster = PsCluster::Start(2);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = *(*cluster)->NewClient();
  const int64_t rows = 1000, cols = 16, n = rows * cols;
  VariableDef def;
  def.name = "shared";
  def.shape = {rows, cols};
  def.initializer.set_type(InitializerSpec::CONSTANT);
  def.initializer.set_value(1.0);
  def.optimizer.set_type(OptimizerSpec::SGD);
  def.optimizer.set_learning_rate(0.5);
  auto placer = *NewRoundRobinPlacer(2);
  ASSERT_TRUE(client->CreateVariables({def}, **NewFixedShardsPartitioner(4), placer.get()).ok());

  const int kClients = 8, kPushes = 25;
  std::vector<std::unique_ptr<Process>> clients;
  for (int c = 0; c < kClients; ++c) {
    auto p = Process::Start(
        BinaryPath("tests/push_client"),
        {absl::StrCat("--ps=", absl::StrJoin((*cluster)->addresses(), ",")), "--variable=shared",
         absl::StrCat("--pushes=", kPushes), absl::StrCat("--client=", c)},
        {}, absl::StrCat(TempDir(), "/client_", c, ".log"));
    ASSERT_TRUE(p.ok()) << p.status();
    clients.push_back(std::move(*p));
  }
  for (auto& p : clients) {
    auto code = p->Wait(absl::Seconds(120));
    ASSERT_TRUE(code.ok()) << code.status();
    ASSERT_EQ(*code, 0) << p->Log();
  }
  std::vector<double> expected(n, 1.0);
  for (int c = 0; c < kClients; ++c) {
    for (int k = 0; k < kPushes; ++k) {
      std::vector<float> g = TestGradient(c, k, n);
      for (int64_t i = 0; i < n; ++i) expected[i] -= 0.5 * g[i];
    }
  }
  std::vector<float> got(n);
  PullVersions versions;
  ASSERT_TRUE(client->Pull("shared", absl::MakeSpan(got), {}, &versions).ok());
  EXPECT_EQ(versions.min_version, kClients * kPushes);
  EXPECT_EQ(versions.max_version, kClients * kPushes);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-4) << "element " << i;
  }
}

}  // namespace
}  // namespace testing
}  // namespace shardps
