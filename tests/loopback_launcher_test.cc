// LoopbackLauncher with real daemons: ps tasks at loopback addresses of their own, stopped and
// started again as new incarnations with their own logs; a chief that exits at start is seen
// as ended, with its exit code; SignalAll stops everything.
#include "tests/loopback_launcher.h"

#include <signal.h>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

TEST(LoopbackLauncherTest, PsTasksServeAndComeBackAsNewIncarnations) {
  LoopbackLauncher::Options options;
  options.num_ps = 2;
  options.num_workers = 0;
  options.start_chief = false;
  auto launcher = LoopbackLauncher::Start(options);
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  LoopbackLauncher& l = **launcher;
  const std::vector<std::string> ps = l.Addresses("ps");
  ASSERT_EQ(ps.size(), 2u);
  EXPECT_NE(ps[0], ps[1]);
  EXPECT_TRUE(l.Addresses("worker").empty());
  EXPECT_EQ(l.Current("chief", 0), nullptr);
  EXPECT_FALSE(l.ChiefEnded().has_value());  // never started: it may yet come
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(WaitForPort(ps[i], absl::Now() + absl::Seconds(60)).ok()) << l.Logs();
    EXPECT_EQ(l.Pid(TaskName("ps", i)), l.Current("ps", i)->pid());
  }

  EXPECT_EQ(l.Launch("ps", 1).code(), absl::StatusCode::kFailedPrecondition);
  auto killed = l.Stop("ps", 1, SIGKILL);
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_EQ(*killed, 128 + SIGKILL);
  EXPECT_EQ(l.Pid("ps-1"), 0);
  ASSERT_TRUE(l.Launch("ps", 1).ok());
  ASSERT_TRUE(WaitForPort(ps[1], absl::Now() + absl::Seconds(60)).ok()) << l.Logs();
  EXPECT_THAT(l.Logs(), HasSubstr("--- ps 1 (incarnation 1) (exited 137) ---"));
  EXPECT_THAT(l.Logs(), HasSubstr("--- ps 1 (incarnation 2) ---"));
  EXPECT_EQ(l.Launch("worker", 7).code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(l.Stop("chief", 0, SIGTERM).ok());

  l.SignalAll(SIGTERM);
  EXPECT_FALSE(l.Current("ps", 0)->Running());
  EXPECT_FALSE(l.Current("ps", 1)->Running());
}

TEST(LoopbackLauncherTest, AChiefThatExitsAtStartHasEndedWithItsCode) {
  LoopbackLauncher::Options options;
  options.num_ps = 1;
  options.num_workers = 0;
  options.chief_flags = {"--evaluator=maybe"};  // refused: exits 2
  auto launcher = LoopbackLauncher::Start(options);
  ASSERT_TRUE(launcher.ok()) << launcher.status();
  LoopbackLauncher& l = **launcher;
  ASSERT_TRUE(PollUntil([&] { return l.ChiefEnded().has_value(); },
                        absl::Now() + absl::Seconds(60)))
      << l.Logs();
  const absl::Status ended = *l.ChiefEnded();
  EXPECT_FALSE(ended.ok());
  EXPECT_THAT(ended.message(), HasSubstr("exited 2"));
  EXPECT_THAT(l.Log("chief-0"), HasSubstr("--evaluator"));
  EXPECT_FALSE(l.chief_address().empty());
}

}  // namespace
}  // namespace testing
}  // namespace shardps
