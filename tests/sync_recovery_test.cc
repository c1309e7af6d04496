// Sync training survives a ps or the chief killed mid-job (kill -9, then started again at the
// same address, as a supervisor would) and ends bit-identical to an undisturbed run of the
// same job: the chief rolls every ps back to a checkpoint after a ps restart, a restarted
// chief resumes from the ps's live state and its step journal, and sync pulls are
// exact-version. Real daemons as processes on localhost; the models compared are the final
// checkpoints', parameters and optimizer slots, bit for bit.
#include <signal.h>

#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checkpoint_testing.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

// Three epochs of Fashion-MNIST's 60 000 examples in batches of 64: 1407 sync steps of 2
// replicas, enough for the evaluator's 0.85.
constexpr int64_t kSteps = 2814;
constexpr int64_t kEverySteps = 200;  // checkpoint interval
constexpr int kWorkers = 2;            // = num_replicas; one step in flight each (sync)

std::string SyncJob(const std::string& checkpoint_dir) {
  return WriteTempFile(
      "sync.json",
      absl::StrCat(R"({"name": "sr", "model": "mlp:64", "batch_size": 64, "mode": "sync",)",
                   R"( "optimizer": {"type": "adam", "learning_rate": 0.002}, "seed": 7,)",
                   R"( "partitioner": "min_size:65536:2", "backend": "cpu", "steps": )", kSteps,
                   R"(, "checkpoint": {"dir": ")", checkpoint_dir,
                   R"(", "every_steps": )", kEverySteps, R"(, "keep": 3},)",
                   R"( "eval_every_steps": 100000})"));
}

// The final checkpoint of `dir`, checked to be one.
absl::StatusOr<std::string> FinalCheckpoint(const std::string& dir) {
  std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
  if (all.empty()) return absl::NotFoundError(absl::StrCat("no checkpoint in ", dir));
  if (!all[0].manifest.final || all[0].manifest.progress.steps_done != kSteps) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the newest checkpoint of ", dir, " is not the final one: ", all[0].path, " at step ",
        all[0].manifest.progress.steps_done));
  }
  return all[0].path;
}

// An undisturbed run of the job, once per test process: its final checkpoint.
const absl::StatusOr<std::string>& Reference() {
  static const absl::StatusOr<std::string>* reference = [] {
    const std::string dir = FreshTempDir("reference");
    TrainingCluster::Options options;
    options.num_workers = kWorkers;
    options.job_file = SyncJob(dir);
    auto cluster = TrainingCluster::Start(options);
    if (!cluster.ok()) return new absl::StatusOr<std::string>(cluster.status());
    auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
    if (!status.ok()) return new absl::StatusOr<std::string>(status.status());
    if (!status->recoveries().empty()) {
      return new absl::StatusOr<std::string>(absl::InternalError(
          absl::StrCat("the undisturbed run recovered\n", (*cluster)->Logs())));
    }
    return new absl::StatusOr<std::string>(FinalCheckpoint(dir));
  }();
  return *reference;
}

TEST(SyncRecoveryTest, PsKilledMidJobEndsBitIdenticalToAnUndisturbedRun) {
  const auto& reference = Reference();
  ASSERT_TRUE(reference.ok()) << reference.status();

  const std::string dir = FreshTempDir("ps_killed");
  TrainingCluster::Options options;
  options.num_workers = kWorkers;
  options.evaluator = true;  // the final evaluation
  options.job_file = SyncJob(dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  // Mid-job: half an interval past a committed checkpoint, so the rollback loses steps.
  auto before = c->WaitForStatus([](const JobStatus& s) {
    return s.has_checkpoint() && s.steps_done() >= s.last_checkpoint().steps_done() + 50;
  });
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_LT(before->steps_done(), kSteps - 300) << "the job ran too fast to kill a ps mid-job";
  auto killed = c->StopPs(1, SIGKILL);
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_EQ(*killed, 128 + SIGKILL);
  ASSERT_TRUE(c->RestartPs(1).ok());

  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), kSteps);
  ASSERT_EQ(status->recoveries_size(), 1) << status->ShortDebugString() << "\n" << c->Logs();
  const RecoveryInfo& r = status->recoveries(0);
  EXPECT_THAT(r.cause(), HasSubstr("ps 1")) << c->Logs();
  EXPECT_THAT(r.action(), HasSubstr("rolled back to checkpoint"));
  EXPECT_GT(r.steps_lost(), 0) << "killed half an interval past a checkpoint";
  // At most an interval (the barrier of the next checkpoint is rounded up to a whole sync
  // step) plus the steps that were in flight.
  EXPECT_LE(r.steps_lost(), kEverySteps + kWorkers + kWorkers) << r.ShortDebugString();
  EXPECT_EQ(status->steps_lost(), r.steps_lost());
  ASSERT_TRUE(status->has_eval()) << c->Logs();
  EXPECT_EQ(status->last_eval().examples(), 10000);
  EXPECT_GE(status->last_eval().accuracy(), 0.85) << c->Logs();
  std::cout << "accuracy after the recovery: " << status->last_eval().accuracy() << "\n";

  auto final_checkpoint = FinalCheckpoint(dir);
  ASSERT_TRUE(final_checkpoint.ok()) << final_checkpoint.status();
  absl::Status same = SameModel(*reference, *final_checkpoint, /*with_slots=*/true);
  EXPECT_TRUE(same.ok()) << same << "\n" << c->Logs();
}

TEST(SyncRecoveryTest, ChiefKilledMidJobResumesLiveAndEndsBitIdentical) {
  const auto& reference = Reference();
  ASSERT_TRUE(reference.ok()) << reference.status();

  const std::string dir = FreshTempDir("chief_killed");
  TrainingCluster::Options options;
  options.num_workers = kWorkers;
  options.job_file = SyncJob(dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto before = c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 250; });
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_LT(before->steps_done(), kSteps - 300) << "the job ran too fast to kill the chief";
  auto resumed = c->KillAndRestartChief();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(resumed->resumed_from(), HasSubstr("live")) << c->Logs();
  EXPECT_GE(resumed->steps_done(), before->steps_done());
  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), kSteps);
  EXPECT_EQ(status->steps_lost(), 0);
  EXPECT_EQ(status->recoveries_size(), 0) << status->ShortDebugString();
  auto code = c->chief()->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << c->Logs();

  auto final_checkpoint = FinalCheckpoint(dir);
  ASSERT_TRUE(final_checkpoint.ok()) << final_checkpoint.status();
  absl::Status same = SameModel(*reference, *final_checkpoint, /*with_slots=*/true);
  EXPECT_TRUE(same.ok()) << same << "\n" << c->Logs();
}

}  // namespace
}  // namespace testing
}  // namespace shardps
