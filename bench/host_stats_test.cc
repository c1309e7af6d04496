// host_stats: /proc/PID/stat and /proc/stat parsed (a command name with spaces and
// parentheses, reaped children's time), a run's others' CPU and its BUSY flag, and the
// process tree's CPU counted with a child that burns some.
#include "bench/host_stats.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <ctime>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(HostStatsTest, ParsesAStatLine) {
  const double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
  // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
  // stime cutime cstime ...
  auto stat = ParseProcStat(
      "4242 (my (odd) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 250 50 30 20 20 0 1 0");
  ASSERT_TRUE(stat.has_value());
  EXPECT_EQ(stat->state, 'S');
  EXPECT_EQ(stat->ppid, 17);
  EXPECT_DOUBLE_EQ(stat->cpu_s, 300 / hz);
  EXPECT_DOUBLE_EQ(stat->children_cpu_s, 50 / hz);
  EXPECT_FALSE(ParseProcStat("").has_value());
  EXPECT_FALSE(ParseProcStat("1 (x) S 1 2").has_value());
}

TEST(HostStatsTest, MachineBusyLeavesIdleAndIowaitOut) {
  // user nice system idle iowait irq softirq steal guest
  EXPECT_DOUBLE_EQ(ParseMachineBusySeconds("cpu  100 10 50 9000 70 5 5 30 999", 100), 2.0);
  EXPECT_TRUE(std::isnan(ParseMachineBusySeconds("intr 1 2 3", 100)));
  EXPECT_GT(MachineBusySeconds(), 0);
  EXPECT_GE(LoadAverage1m(), 0);
  EXPECT_GE(OnlineCores(), 1);
}

TEST(HostStatsTest, OthersAreTheMachineLessTheTreeAndBusyAboveATenthOfTheCores) {
  // 10 s on 2 cores: the machine busy 5 s, the tree 4.5 s: others 0.5 s, 0.05 cores.
  HostStats quiet = Between(2, 1.0, 1.5, 10, 100, 105, 20, 24.5);
  EXPECT_DOUBLE_EQ(quiet.others_cpu_s, 0.5);
  EXPECT_DOUBLE_EQ(quiet.others_cores(), 0.05);
  EXPECT_FALSE(quiet.busy());
  EXPECT_EQ(quiet.Line(), "load 1.00 -> 1.50; other processes 0.05 cores (2% of 2)");

  HostStats busy = Between(2, 3.0, 3.2, 10, 100, 110, 20, 27);
  EXPECT_DOUBLE_EQ(busy.others_cores(), 0.3);
  EXPECT_TRUE(busy.busy());
  EXPECT_THAT(busy.Line(), HasSubstr("other processes 0.30 cores (15% of 2); BUSY"));

  // Ticks round differently: a tree counted above the machine leaves others at 0.
  EXPECT_DOUBLE_EQ(Between(2, 0, 0, 1, 0, 1, 0, 1.02).others_cpu_s, 0);
  EXPECT_THAT(Between(2, 0, 0, 1, 0, 1, 0, 1.02).Line(), Not(HasSubstr("BUSY")));
}

// Uses `seconds` of CPU time (however long that takes on a loaded machine).
TEST(HostStatsTest, ASampleRoundTripsThroughItsText) {
  const HostSample a = SampleHost(getpid());
  std::optional<HostSample> back = ParseSample(FormatSample(a));
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->load, a.load);
  EXPECT_EQ(back->wall_s, a.wall_s);
  EXPECT_EQ(back->machine_s, a.machine_s);
  EXPECT_EQ(back->tree_s, a.tree_s);
  EXPECT_FALSE(ParseSample("1 2 3").has_value());
  EXPECT_FALSE(ParseSample("1 2 3 x").has_value());
  HostSample b = a;
  b.load = a.load + 1;
  b.wall_s = a.wall_s + 10;
  b.machine_s = a.machine_s + 5;
  b.tree_s = a.tree_s + 4;
  const HostStats h = Between(2, a, b);
  EXPECT_DOUBLE_EQ(h.seconds, 10);
  EXPECT_DOUBLE_EQ(h.others_cpu_s, 1);
  EXPECT_DOUBLE_EQ(h.load_after, a.load + 1);
}

void Burn(double seconds) {
  volatile double x = 1;
  while (std::clock() < static_cast<std::clock_t>(seconds * CLOCKS_PER_SEC)) {
    x = x * 1.0000001 + 1e-9;
  }
}

TEST(HostStatsTest, TheTreeCountsAChildBothLiveAndReaped) {
  const pid_t self = getpid();
  EXPECT_GE(TreeCpuSeconds(self), ProcessCpuSeconds(self));
  EXPECT_GT(SchedulerCpuSeconds(self), 0);
  EXPECT_EQ(SchedulerCpuSeconds(-5), 0);
  EXPECT_TRUE(std::isnan(TreeCpuSeconds(-5)));
  HostRun run;
  const double before = TreeCpuSeconds(self);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  if (child == 0) {
    Burn(0.3);
    char c = 'x';
    (void)!write(pipe_fds[1], &c, 1);  // burnt; now wait to be killed
    pause();
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_THAT(ChildPids(self), ::testing::Contains(child));
  const double live = TreeCpuSeconds(self);
  EXPECT_GE(live - before, 0.2);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_THAT(ChildPids(self), Not(::testing::Contains(child)));
  EXPECT_GE(TreeCpuSeconds(self) - before, 0.2);  // in this process' reaped children's time
  const HostStats stats = run.Stop();
  EXPECT_GT(stats.seconds, 0.25);
  EXPECT_GE(stats.others_cpu_s, 0);
  EXPECT_EQ(stats.cores, OnlineCores());
}

}  // namespace
}  // namespace bench
}  // namespace shardps
