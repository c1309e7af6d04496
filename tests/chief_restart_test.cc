// A chief SIGTERM'd mid-job while `shardctl watch` follows it, as processes on localhost
// (issue 23 §5): the watch rides the outage out as it does a killed chief's (the stopping
// chief's server cancels the GetStatus in flight: CANCELLED once ended the watch with exit 1);
// the chief, restarted with its --checkpoint_dir and no --job (as a supervisor restarts it),
// resumes the job recorded there without a new submit; its status keeps the recoveries and
// the steps they lost from before its restart; and the watch ends with the job's final
// summary and exit 0.
//
// Thread-safety: one test thread.
#include <csignal>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSteps = 8000;

TEST(ChiefRestartTest, SigtermedChiefRestartedWithoutJobResumesAndTheWatchEndsZero) {
  TrainingCluster::Options options;
  options.checkpoint_dir = FreshTempDir("chief_restart_ckpt");  // no --job: submitted below
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  const std::string shardctl = BinaryPath("coordinator/cli/shardctl");
  const std::string chief = absl::StrCat("--chief=", c->chief_address());

  const std::string job = WriteTempFile(
      "restart.json",
      absl::StrCat(R"({"name": "rs", "model": "mlp:64", "batch_size": 64, "mode": "async",)",
                   R"( "seed": 3, "backend": "cpu", "partitioner": "fixed:2",)",
                   R"( "optimizer": {"type": "adam", "learning_rate": 0.002}, "steps": )",
                   kSteps, "}"));
  std::string out;
  auto submitted = RunCommand(shardctl, {"submit", job, chief}, {}, &out, absl::Seconds(60));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(*submitted, 0) << out;

  auto watch = Process::Start(shardctl, {"watch", chief, "--job_wait=120", "--interval=0.2"}, {},
                              absl::StrCat(TempDir(), "/watch.log"));
  ASSERT_TRUE(watch.ok()) << watch.status();

  // A recovery first: ps 1 restarts, and the job rolls back (or re-initializes).
  auto started = c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 100; });
  ASSERT_TRUE(started.ok()) << started.status();
  auto killed = c->StopPs(1, SIGKILL);
  ASSERT_TRUE(killed.ok()) << killed.status();
  ASSERT_TRUE(c->RestartPs(1).ok());
  auto recovered = c->WaitForStatus([](const JobStatus& s) { return s.recoveries_size() >= 1; });
  ASSERT_TRUE(recovered.ok()) << recovered.status() << c->Logs();

  auto before = c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 300; });
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_LT(before->steps_done(), kSteps - 2000) << "the job ran too fast to stop the chief";
  ASSERT_GE(before->recoveries_size(), 1);
  ASSERT_GT(before->steps_lost(), 0);
  auto code = c->StopChief(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 5) << c->Logs();
  EXPECT_TRUE((*watch)->Running()) << "the watch ended with the chief:\n" << (*watch)->Log();

  ASSERT_TRUE(c->RestartChief().ok());  // the same flags: --checkpoint_dir, no --job
  auto resumed = c->WaitForStatus([](const JobStatus& s) { return s.state() != JobStatus::NO_JOB; });
  ASSERT_TRUE(resumed.ok()) << resumed.status() << c->Logs();
  EXPECT_EQ(resumed->job_id(), before->job_id());
  EXPECT_THAT(c->chief()->Log(), HasSubstr("no --job: resuming job " + before->job_id()));
  EXPECT_GE(resumed->steps_done(), before->steps_done());
  // The recoveries and steps lost before the restart are still reported.
  EXPECT_EQ(resumed->recoveries_size(), before->recoveries_size()) << resumed->DebugString();
  EXPECT_EQ(resumed->steps_lost(), before->steps_lost());
  if (resumed->recoveries_size() > 0 && before->recoveries_size() > 0) {
    EXPECT_EQ(resumed->recoveries(0).cause(), before->recoveries(0).cause());
  }

  auto watched = (*watch)->Wait(absl::Minutes(4));
  ASSERT_TRUE(watched.ok()) << watched.status() << c->Logs();
  const std::string log = (*watch)->Log();
  EXPECT_EQ(*watched, 0) << log;
  EXPECT_THAT(log, HasSubstr(absl::StrCat("job ", before->job_id(), " SUCCEEDED"))) << log;
  EXPECT_THAT(log, HasSubstr("accuracy")) << log;
  EXPECT_THAT(log, HasSubstr("waiting up to")) << log;  // it said it rode the outage out
  auto chief_code = c->chief()->Wait(absl::Seconds(60));
  ASSERT_TRUE(chief_code.ok()) << chief_code.status();
  EXPECT_EQ(*chief_code, 0) << c->Logs();
}

// A job that ended (cancelled) is not resumed by a chief restarted without --job: it waits
// for a submitted job.
TEST(ChiefRestartTest, ARestartedChiefDoesNotResumeACancelledJob) {
  TrainingCluster::Options options;
  options.long_lived = true;
  options.checkpoint_dir = FreshTempDir("chief_restart_cancelled");
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  const std::string shardctl = BinaryPath("coordinator/cli/shardctl");
  const std::string chief = absl::StrCat("--chief=", c->chief_address());
  const std::string job = WriteTempFile(
      "cancelled.json", R"({"name": "rc", "model": "mlp:16", "batch_size": 32, "mode": "async",
                            "backend": "cpu", "steps": 1000000})");
  std::string out;
  auto submitted = RunCommand(shardctl, {"submit", job, chief}, {}, &out, absl::Seconds(60));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_EQ(*submitted, 0) << out;
  ASSERT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() > 0; }).ok());
  auto cancelled = RunCommand(shardctl, {"cancel", chief}, {}, &out, absl::Seconds(60));
  ASSERT_TRUE(cancelled.ok()) << cancelled.status();
  ASSERT_EQ(*cancelled, 0) << out;
  ASSERT_TRUE(c->WaitForState(JobStatus::CANCELLED, absl::Minutes(1)).ok());
  auto code = c->StopChief(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  ASSERT_TRUE(c->RestartChief().ok());
  ASSERT_TRUE(c->chief()->WaitForLog("waiting for a submitted job", absl::Seconds(60)))
      << c->Logs();
  auto status = c->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), JobStatus::NO_JOB) << status->DebugString();
  EXPECT_THAT(c->chief()->Log(), ::testing::Not(HasSubstr("resuming job"))) << c->Logs();
}

}  // namespace
}  // namespace testing
}  // namespace shardps
