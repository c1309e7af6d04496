// Network faults across network namespaces: the main job's daemons each in a
// namespace of their own (deploy/run_netns.sh, through NetnsCluster), and one task's link
// cut (its veth set down at the bridge: packets dropped, nothing refused, as a pulled cable or
// a partitioned host) and brought back while an async job runs.
//  - a worker: nothing hangs; its leases expire and its steps go to the other worker, which
//    carries the job on; when the link is back the chief takes it in again and it completes
//    steps (the time from link-up to its next step is printed);
//  - a ps: the chief pauses the job naming the ps unreachable, and no daemon spins or floods
//    its log while it waits (CPU time and log lines of every daemon over the cut); when the
//    link is back it is the same incarnation: no rollback, nothing lost;
//  - the chief: the ps and workers keep their state (same processes) and the chief resumes
//    with them; no step lost; no daemon spins while it is away.
// Every job ends with each step counted once: steps_done == steps, and in the final
// checkpoint every shard's version == steps (an async step updates each shard once). Each
// case is its own cluster (random prefix and subnet), so cases and runs may go in parallel,
// and each checks that nothing (namespace, link, /etc/netns entry, process) is left after it.
// Each cut lasts 10 s: five step timeouts (2 s) and past the point where the chief's ps
// probes and the clients' reconnects reach their backoff caps (8 s and 2 s), so a longer cut
// (30 s, say) reaches no state that this one does not, and the per-cut bounds on CPU and log
// lines are tighter for it. Skipped (with the reason) where namespaces cannot be made.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checkpoint_testing.h"
#include "tests/netns_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kCut = absl::Seconds(10);
constexpr int kStepTimeoutMs = 2000;

std::string AsyncJob(const std::string& name, int64_t steps) {
  return absl::StrCat(
      R"({"name": ")", name, R"(", "model": "mlp:64", "dataset": "fashion_mnist",)",
      R"( "batch_size": 64, "steps": )", steps,
      R"(, "optimizer": {"type": "adam", "learning_rate": 0.002}, "mode": "async",)",
      R"( "partitioner": "min_size:65536:2", "seed": 7, "backend": "cpu", "step_timeout_ms": )",
      kStepTimeoutMs, R"(, "eval_every_steps": )", steps, "}");
}

// Skips the test (loudly) where network namespaces cannot be made.
#define SKIP_WITHOUT_NAMESPACES()                                                         \
  do {                                                                                    \
    const std::string why = WhyNoNamespaces(absl::StrCat("nf", getpid()));                \
    if (!why.empty()) {                                                                   \
      std::cerr << "\n*** SKIPPED network_fault_test: cannot make network namespaces here: " \
                << why << " ***\n\n";                                                     \
      GTEST_SKIP() << "cannot make network namespaces here: " << why;                    \
    }                                                                                     \
  } while (0)

void SleepUntil(absl::Time t) {
  const absl::Duration left = t - absl::Now();
  if (left > absl::ZeroDuration()) absl::SleepFor(left);
}

int64_t WorkerSteps(const JobStatus& s, int index) {
  for (const WorkerInfo& w : s.workers()) {
    if (w.index() == index) return w.steps_done();
  }
  return -1;
}

int CountLines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

// Every daemon's CPU time and log length at one moment.
struct Sample {
  absl::Time at;
  std::map<std::string, pid_t> pid;
  std::map<std::string, absl::Duration> cpu;
  std::map<std::string, int> lines;
};

const std::vector<std::string> kTasks = {"chief-0",  "ps-0",     "ps-1",
                                         "worker-0", "worker-1", "evaluator-0"};

Sample TakeSample(NetnsCluster* c) {
  Sample s;
  s.at = absl::Now();
  for (const std::string& task : kTasks) {
    s.pid[task] = c->Pid(task);
    s.cpu[task] = ProcessCpuTime(s.pid[task]);
    s.lines[task] = CountLines(c->Log(task));
  }
  return s;
}

// No daemon spins or floods its log between `a` and `b` (a cut that stops the job: every
// daemon waits, retrying with backoff): each used under 30% of a core (a step of mlp:64
// takes a few ms, so a worker finishing what it held at the cut adds next to nothing) and
// wrote under 50 log lines. Prints the figures.
void ExpectQuiet(const Sample& a, const Sample& b, const std::string& what,
                 const std::string& logs) {
  const double window_s = absl::ToDoubleSeconds(b.at - a.at);
  std::string figures;
  for (const std::string& task : kTasks) {
    SCOPED_TRACE(task);
    ASSERT_EQ(a.pid.at(task), b.pid.at(task)) << task << " restarted during " << what;
    ASSERT_GE(b.cpu.at(task), absl::ZeroDuration()) << "no /proc stat for " << task;
    const double cpu_s = absl::ToDoubleSeconds(b.cpu.at(task) - a.cpu.at(task));
    const int lines = b.lines.at(task) - a.lines.at(task);
    absl::StrAppendFormat(&figures, " %s %.2f s CPU (%.1f%%), %d log lines;", task, cpu_s,
                          100 * cpu_s / window_s, lines);
    EXPECT_LT(cpu_s, 0.3 * window_s) << task << " spins during " << what << "\n" << logs;
    EXPECT_LT(lines, 50) << task << " floods its log during " << what << "\n" << logs;
  }
  std::printf("network_fault_test: %s, %.1f s window:%s\n", what.c_str(), window_s,
              figures.c_str());
  std::fflush(stdout);
}

// Starts a cluster (prefix NAME...) on an async job of `steps` and waits until `ready` holds
// for its status, with at least `room` steps still to go (else FAILED_PRECONDITION: the job
// ran too fast for the cut).
absl::StatusOr<std::unique_ptr<NetnsCluster>> StartJob(
    const std::string& name, const std::string& job_name, int64_t steps, int64_t room,
    const std::function<bool(const JobStatus&)>& ready) {
  NetnsCluster::Options options;
  options.name = name;
  options.job_json = AsyncJob(job_name, steps);
  auto cluster = NetnsCluster::Start(options);
  if (!cluster.ok()) return cluster.status();
  auto status = (*cluster)->WaitForStatus(ready);
  if (!status.ok()) return status.status();
  if (status->steps_done() > steps - room) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the job ran too fast to cut a link: ", status->steps_done(), " of ", steps, " done"));
  }
  return cluster;
}

// The job ended with every step counted once; the launcher exited 0 and left nothing.
void ExpectFinishedOnce(NetnsCluster* c, const JobStatus& done, int64_t steps) {
  EXPECT_EQ(done.steps_done(), steps);
  EXPECT_EQ(done.steps_lost(), 0);
  EXPECT_EQ(done.recoveries_size(), 0) << done.ShortDebugString();
  const std::string logs = c->Logs();
  absl::StatusOr<int> rc = c->WaitForLauncher();
  ASSERT_TRUE(rc.ok()) << rc.status() << "\n" << logs;
  EXPECT_EQ(*rc, 0) << c->Logs();
  // Each async step updates each shard once: the final checkpoint has every shard at `steps`.
  std::vector<CommittedCheckpoint> all = CommittedCheckpoints(c->checkpoint_dir());
  ASSERT_FALSE(all.empty()) << "no checkpoint in " << c->checkpoint_dir() << "\n" << logs;
  ASSERT_TRUE(all[0].manifest.final) << all[0].path << " is not the final checkpoint";
  EXPECT_EQ(all[0].manifest.progress.steps_done, steps);
  const std::map<std::string, int64_t> versions = ManifestShardVersions(all[0].manifest);
  EXPECT_FALSE(versions.empty());
  for (const auto& [shard, version] : versions) EXPECT_EQ(version, steps) << shard;
  EXPECT_EQ(c->Shutdown(), "") << "left behind";
}

TEST(NetworkFaultTest, WorkerCutOffIsReplacedAndRejoinsWhenItsLinkIsBack) {
  SKIP_WITHOUT_NAMESPACES();
  // Long enough to outlast worker 1's way back: its connection to the chief, cut for 10 s,
  // recovers when TCP next retransmits (up to ~13 s after the link is up, by the backoff
  // of a 10 s outage), and its rejoin must be seen before the job ends (~900 steps/s here).
  constexpr int64_t kSteps = 24000;
  auto cluster = StartJob("nfw", "cut-worker", kSteps, 2 * kSteps / 3, [](const JobStatus& s) {
    return WorkerSteps(s, 1) >= 50 && WorkerSteps(s, 0) >= 50;
  });
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  NetnsCluster* c = cluster->get();

  ASSERT_TRUE(c->SetLink("worker-1", false).ok());
  const absl::Time cut = absl::Now();
  // The chief gives up on worker 1 (its calls time out) and worker 0 carries on.
  auto failed = c->WaitForStatus([](const JobStatus& s) {
    return s.workers_size() == 2 && s.workers(1).state() == "failed";
  });
  ASSERT_TRUE(failed.ok()) << failed.status();
  const int64_t w1_steps = WorkerSteps(*failed, 1);
  SleepUntil(cut + kCut);
  auto during = c->Status();
  ASSERT_TRUE(during.ok()) << during.status();
  EXPECT_EQ(WorkerSteps(*during, 1), w1_steps) << "worker 1 completed a step while cut off";
  EXPECT_NE(during->workers(1).state(), "busy");
  EXPECT_GT(during->steps_done(), failed->steps_done() + 50) << "the job stalled during the cut";
  EXPECT_GE(during->steps_requeued(), 1) << "worker 1's leased steps were not re-leased";
  ASSERT_LT(during->steps_done(), kSteps / 2) << "the job ran too fast to see worker 1 rejoin";

  ASSERT_TRUE(c->SetLink("worker-1", true).ok());
  const absl::Time back = absl::Now();
  auto rejoined = c->WaitForStatus(
      [&](const JobStatus& s) { return WorkerSteps(s, 1) > w1_steps; }, absl::Seconds(45));
  ASSERT_TRUE(rejoined.ok()) << rejoined.status();
  std::printf(
      "network_fault_test: worker 1 completed a step %.2f s after its link came back (cut "
      "%.0f s, step_timeout_ms %d)\n",
      absl::ToDoubleSeconds(absl::Now() - back), absl::ToDoubleSeconds(kCut), kStepTimeoutMs);
  std::fflush(stdout);

  auto done = c->WaitForSuccess();
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_GT(WorkerSteps(*done, 1), w1_steps);
  ExpectFinishedOnce(c, *done, kSteps);
}

TEST(NetworkFaultTest, PsCutOffPausesTheJobQuietlyAndItResumesWithoutRollback) {
  SKIP_WITHOUT_NAMESPACES();
  constexpr int64_t kSteps = 4000;
  auto cluster = StartJob("nfp", "cut-ps", kSteps, 400,
                          [](const JobStatus& s) { return s.steps_done() >= 200; });
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  NetnsCluster* c = cluster->get();

  ASSERT_TRUE(c->SetLink("ps-1", false).ok());
  const absl::Time cut = absl::Now();
  // Over the whole cut no daemon spins: the workers' calls to ps 1 time out and back off,
  // the chief's probes back off, the evaluator waits.
  const Sample a = TakeSample(c);
  auto paused = c->WaitForStatus([](const JobStatus& s) {
    return absl::StrContains(s.phase(), "ps 1") && absl::StrContains(s.phase(), "unreachable");
  });
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_EQ(paused->state(), JobStatus::RUNNING);
  std::printf("network_fault_test: the chief paused the job %.2f s after ps 1's link was cut\n",
              absl::ToDoubleSeconds(absl::Now() - cut));
  SleepUntil(cut + kCut);
  const Sample b = TakeSample(c);
  ExpectQuiet(a, b, "ps 1's link cut", c->Logs());
  auto still = c->Status();
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_THAT(still->phase(), HasSubstr("unreachable"));

  ASSERT_TRUE(c->SetLink("ps-1", true).ok());
  auto done = c->WaitForSuccess();
  ASSERT_TRUE(done.ok()) << done.status();
  ExpectFinishedOnce(c, *done, kSteps);
}

TEST(NetworkFaultTest, ChiefCutOffFindsPsAndWorkersAsTheyWereAndLosesNoStep) {
  SKIP_WITHOUT_NAMESPACES();
  constexpr int64_t kSteps = 4000;
  auto cluster = StartJob("nfc", "cut-chief", kSteps, 400,
                          [](const JobStatus& s) { return s.steps_done() >= 200; });
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  NetnsCluster* c = cluster->get();

  ASSERT_TRUE(c->SetLink("chief-0", false).ok());
  const absl::Time cut = absl::Now();
  // Over the whole cut no daemon spins: the workers finish the steps they hold (their answers
  // cannot reach the chief) and wait, the chief's calls time out and back off.
  const Sample a = TakeSample(c);
  SleepUntil(cut + kCut);
  const Sample b = TakeSample(c);
  EXPECT_FALSE(c->Status(absl::Milliseconds(500)).ok()) << "the chief answered while cut off";
  ExpectQuiet(a, b, "the chief's link cut", c->Logs());

  ASSERT_TRUE(c->SetLink("chief-0", true).ok());
  auto done = c->WaitForSuccess();
  ASSERT_TRUE(done.ok()) << done.status();
  // Nobody was restarted: the ps and workers kept their state, the chief its job.
  const Sample after = TakeSample(c);
  for (const std::string& task : kTasks) EXPECT_EQ(after.pid.at(task), a.pid.at(task)) << task;
  ExpectFinishedOnce(c, *done, kSteps);
}

}  // namespace
}  // namespace testing
}  // namespace shardps
