#include "coordinator/in_process_ps.h"

#include <vector>

#include "absl/types/span.h"
#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace shardps {
namespace {

InProcessPs::Options Intercepted() {
  InProcessPs::Options o;
  o.first_incarnation = 100;
  o.intercept = true;
  o.client.max_attempts = 1;
  return o;
}

TEST(InProcessPsTest, ServesEveryTaskUnderItsNameAndIncarnation) {
  InProcessPs::Options o = Intercepted();
  o.num_tasks = 3;
  o.name_prefix = "ps:";
  absl::StatusOr<std::unique_ptr<InProcessPs>> ps = InProcessPs::Create(o);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_EQ((*ps)->name(2), "ps:2");
  for (int k = 0; k < 3; ++k) {
    HealthResponse health;
    (*ps)->store(k)->Health(&health);
    EXPECT_EQ(health.incarnation(), 100u + k) << k;
    EXPECT_EQ((*ps)->interceptor(k)->name(), (*ps)->name(k));
  }
  EXPECT_EQ((*ps)->client()->num_ps(), 3);
}

TEST(InProcessPsTest, WithoutInterceptorsTheClientReachesTheStores) {
  InProcessPs::Options o;
  o.num_tasks = 1;
  absl::StatusOr<std::unique_ptr<InProcessPs>> ps = InProcessPs::Create(o);
  ASSERT_TRUE(ps.ok()) << ps.status();
  EXPECT_TRUE((*ps)->client()->SetGenerationAll(4).ok());
  HealthResponse health;
  (*ps)->store(0)->Health(&health);
  EXPECT_EQ(health.generation(), 4);
  EXPECT_NE(health.incarnation(), 0u);  // drawn at random
}

TEST(InProcessPsTest, EveryStoreTakesTheGivenOptions) {
  InProcessPs::Options o;
  o.store.memory_budget_bytes = 4 << 20;
  absl::StatusOr<std::unique_ptr<InProcessPs>> ps = InProcessPs::Create(o);
  ASSERT_TRUE(ps.ok()) << ps.status();
  for (int k = 0; k < 2; ++k) {
    HealthResponse health;
    (*ps)->store(k)->Health(&health);
    EXPECT_EQ(health.task_index(), k);
    EXPECT_EQ(health.memory_budget_bytes(), 4 << 20) << k;
  }
}

TEST(InProcessPsTest, ADownTaskFailsUnavailableUntilUp) {
  absl::StatusOr<std::unique_ptr<InProcessPs>> ps = InProcessPs::Create(Intercepted());
  ASSERT_TRUE(ps.ok()) << ps.status();
  (*ps)->Down(1);
  const absl::Status down = (*ps)->client()->SetGenerationAll(2);
  EXPECT_EQ(down.code(), absl::StatusCode::kUnavailable) << down;
  (*ps)->Up(1);
  EXPECT_TRUE((*ps)->client()->SetGenerationAll(2).ok());
}

TEST(InProcessPsTest, ARestartedTaskIsANewIncarnationHoldingNothing) {
  absl::StatusOr<std::unique_ptr<InProcessPs>> ps = InProcessPs::Create(Intercepted());
  ASSERT_TRUE(ps.ok()) << ps.status();
  ASSERT_TRUE((*ps)->client()->SetGenerationAll(3).ok());
  ShardStore* old = (*ps)->store(1);
  ASSERT_TRUE((*ps)->Restart(1, 555).ok());
  EXPECT_NE((*ps)->store(1), old);
  HealthResponse health;
  (*ps)->store(1)->Health(&health);
  EXPECT_EQ(health.incarnation(), 555u);
  EXPECT_EQ(health.generation(), 0);
  // Its calls reach the new store.
  ASSERT_TRUE((*ps)->client()->SetGenerationAll(5).ok());
  (*ps)->store(1)->Health(&health);
  EXPECT_EQ(health.generation(), 5);
}

}  // namespace
}  // namespace shardps
