// Async training survives a ps or the chief going away mid-job, as processes on localhost:
// a ps killed -9 (and started again at its address) rolls the job back to the newest
// checkpoint, a ps killed while it writes a checkpoint leaves that checkpoint uncommitted and
// the rollback takes the one before (the final checkpoint too: the job does not end on a ps
// that lost the model), a chief killed -9 or stopped with SIGTERM is resumed by
// its restart from the ps's live state. Every step is applied exactly once: each async step
// updates each shard once, so at the end every shard's version is the job's step count.
#include <signal.h>
#include <unistd.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checkpoint_testing.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr int kWorkers = 2;
constexpr int kInFlight = kWorkers * 2;  // async: 2 steps leased per worker

struct AsyncJob {
  std::string name = "ar";
  std::string model = "mlp:64";
  int64_t steps = 1500;
  int64_t every_steps = 100;
  std::string extra;  // more job file fields, each with its leading comma
};

std::string JobFile(const AsyncJob& job, const std::string& checkpoint_dir) {
  return WriteTempFile(
      job.name + ".json",
      absl::StrCat(R"({"name": ")", job.name, R"(", "model": ")", job.model,
                   R"(", "batch_size": 64, "mode": "async", "seed": 7, "backend": "cpu",)",
                   R"( "optimizer": {"type": "adam", "learning_rate": 0.002, "decay_rate": 0.5,)",
                   R"( "decay_steps": 1500}, "partitioner": "min_size:65536:2", "steps": )",
                   job.steps, R"(, "checkpoint": {"dir": ")", checkpoint_dir,
                   R"(", "every_steps": )", job.every_steps, R"(, "keep": 3})", job.extra,
                   "}"));
}

// Every step applied exactly once: the final checkpoint (of `steps` steps) records every
// shard at version `steps`.
void ExpectEveryShardAtVersion(const std::string& dir, int64_t steps, const std::string& logs) {
  std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
  ASSERT_FALSE(all.empty()) << "no checkpoint in " << dir << "\n" << logs;
  ASSERT_TRUE(all[0].manifest.final) << all[0].path << " is not the final checkpoint\n" << logs;
  EXPECT_EQ(all[0].manifest.progress.steps_done, steps);
  const std::map<std::string, int64_t> versions = ManifestShardVersions(all[0].manifest);
  ASSERT_FALSE(versions.empty());
  for (const auto& [shard, version] : versions) {
    EXPECT_EQ(version, steps) << shard << " in " << all[0].path;
  }
}

// A cluster whose ps each wait 1.5 s before they write a checkpoint's file: time to kill one
// mid-write.
absl::StatusOr<std::unique_ptr<TrainingCluster>> StartWithSlowCheckpoints(
    const AsyncJob& job, const std::string& dir) {
  TrainingCluster::Options options;
  options.num_workers = kWorkers;
  options.job_file = JobFile(job, dir);
  options.ps_flags = {"--test_snapshot_write_delay_ms=1500"};
  return TrainingCluster::Start(options);
}

// Kills ps 1 (SIGKILL) once checkpoint `id` is cut and it is about to write its file, and
// starts it again at its address.
void KillPs1WhileItWrites(TrainingCluster* c, int64_t id) {
  ASSERT_TRUE(c->ps(1)->WaitForLog(absl::StrCat("checkpoint ", id, "'s file waits"),
                                   absl::Minutes(1)))
      << c->Logs();
  auto killed = c->StopPs(1, SIGKILL);
  ASSERT_TRUE(killed.ok()) << killed.status();
}

// Waits for the job to succeed after ps 1 was killed and restarted: one recovery, caused by
// ps 1, and no checkpoint error left.
void SucceedsAfterOneRecoveryByPs1(TrainingCluster* c, JobStatus* status) {
  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(done.ok()) << done.status();
  ASSERT_EQ(done->recoveries_size(), 1) << done->ShortDebugString() << "\n" << c->Logs();
  EXPECT_THAT(done->recoveries(0).cause(), HasSubstr("ps 1"));
  EXPECT_TRUE(done->checkpoint_error().empty()) << done->checkpoint_error();
  *status = *std::move(done);
}

TEST(AsyncRecoveryTest, PsKilledMidJobRollsBackCountsEveryStepOnceAndReachesAccuracy) {
  // Three epochs of the 128-unit MLP: enough for the evaluator's 0.85.
  AsyncJob job;
  job.model = "mlp:128";
  job.steps = 2814;
  job.every_steps = 200;
  job.extra = R"(, "eval_every_steps": 1000)";
  const std::string dir = FreshTempDir("ps_killed");
  TrainingCluster::Options options;
  options.num_workers = kWorkers;
  options.evaluator = true;
  options.job_file = JobFile(job, dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto before = c->WaitForStatus([](const JobStatus& s) {
    return s.has_checkpoint() && s.steps_done() >= s.last_checkpoint().steps_done() + 50;
  });
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_LT(before->steps_done(), job.steps - 400) << "the job ran too fast to kill a ps";
  auto killed = c->StopPs(0, SIGKILL);
  ASSERT_TRUE(killed.ok()) << killed.status();
  EXPECT_EQ(*killed, 128 + SIGKILL);
  // While ps 0 is down, the job says why it does not advance.
  auto paused = c->WaitForStatus([](const JobStatus& s) {
    return absl::StrContains(s.phase(), "ps 0") && absl::StrContains(s.phase(), "unreachable");
  });
  ASSERT_TRUE(paused.ok()) << paused.status();
  EXPECT_EQ(paused->state(), JobStatus::RUNNING);
  ASSERT_TRUE(c->RestartPs(0).ok());

  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), job.steps);
  ASSERT_EQ(status->recoveries_size(), 1) << status->ShortDebugString() << "\n" << c->Logs();
  const RecoveryInfo& r = status->recoveries(0);
  EXPECT_THAT(r.cause(), HasSubstr("ps 0"));
  // Back to the newest checkpoint committed before the kill (none can commit without ps 0),
  // losing only the steps done since it: the steps done when the job paused for ps 0 and the
  // ones in flight then. (How far past that checkpoint the kill came depends on the load: a
  // checkpoint cut but not yet committed at the kill does not count.)
  EXPECT_THAT(r.action(), HasSubstr(absl::StrCat("rolled back to checkpoint ",
                                                 paused->last_checkpoint().id(), " (step ",
                                                 paused->last_checkpoint().steps_done(), ")")));
  EXPECT_GT(r.steps_lost(), 0);
  EXPECT_LE(r.steps_lost(),
            paused->steps_done() - paused->last_checkpoint().steps_done() + kInFlight)
      << r.ShortDebugString() << "\npaused at: " << paused->ShortDebugString();
  EXPECT_EQ(status->steps_lost(), r.steps_lost());
  ASSERT_TRUE(status->has_eval()) << c->Logs();
  EXPECT_EQ(status->last_eval().examples(), 10000);
  EXPECT_GE(status->last_eval().accuracy(), 0.85) << c->Logs();
  ExpectEveryShardAtVersion(dir, job.steps, c->Logs());
}

TEST(AsyncRecoveryTest, PsKilledWhileWritingACheckpointRollsBackToThePreviousOne) {
  AsyncJob job;
  // Long enough that checkpoint 2 is cut before the job's end even at 2,000 steps/s (the
  // steps go on while checkpoint 1's files wait 1.5 s); the final checkpoint has its own test.
  job.steps = 6000;
  const std::string dir = FreshTempDir("killed_writing");
  auto cluster = StartWithSlowCheckpoints(job, dir);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto first = c->WaitForStatus([](const JobStatus& s) { return s.has_checkpoint(); });
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->last_checkpoint().id(), 1);
  const int64_t first_steps = first->last_checkpoint().steps_done();
  ASSERT_NO_FATAL_FAILURE(KillPs1WhileItWrites(c, 2));
  const std::string interrupted = absl::StrCat(dir, "/ckpt-000000002");
  EXPECT_EQ(access(interrupted.c_str(), F_OK), 0) << "checkpoint 2 was not prepared";
  EXPECT_NE(access((interrupted + "/manifest.json").c_str(), F_OK), 0)
      << "checkpoint 2 was committed without ps 1's file";
  ASSERT_TRUE(c->RestartPs(1).ok());

  JobStatus status;
  ASSERT_NO_FATAL_FAILURE(SucceedsAfterOneRecoveryByPs1(c, &status));
  EXPECT_THAT(status.recoveries(0).action(),
              HasSubstr(absl::StrCat("rolled back to checkpoint 1 (step ", first_steps, ")")))
      << c->Logs();
  // Checkpoint 2 never became a checkpoint; the later ones did.
  for (const CommittedCheckpoint& ckpt : CommittedCheckpoints(dir)) EXPECT_NE(ckpt.id, 2);
  EXPECT_THAT(c->chief()->Log(), Not(HasSubstr("checkpoint 2 (every_steps) committed")));
  EXPECT_THAT(c->chief()->Log(), HasSubstr("checkpoint (every_steps) failed"));
  ExpectEveryShardAtVersion(dir, job.steps, c->Logs());
}

// The final checkpoint is the one a ps dies writing: the trained model is gone from that ps,
// so the job may not end on it. It runs again from the last checkpoint (here none: from its
// start) and ends with a final checkpoint of every step, each applied once.
TEST(AsyncRecoveryTest, PsKilledWhileWritingTheFinalCheckpointRunsTheJobAgain) {
  AsyncJob job;
  job.name = "arf";
  job.steps = 400;
  job.every_steps = 0;  // the final checkpoint only
  const std::string dir = FreshTempDir("killed_writing_final");
  auto cluster = StartWithSlowCheckpoints(job, dir);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  ASSERT_NO_FATAL_FAILURE(KillPs1WhileItWrites(c, 1));
  ASSERT_TRUE(c->RestartPs(1).ok());

  JobStatus status;
  ASSERT_NO_FATAL_FAILURE(SucceedsAfterOneRecoveryByPs1(c, &status));
  const RecoveryInfo& r = status.recoveries(0);
  EXPECT_THAT(r.action(), HasSubstr("re-initialized (no usable checkpoint)"));
  EXPECT_EQ(r.steps_lost(), job.steps) << r.ShortDebugString();
  EXPECT_EQ(status.steps_done(), job.steps);
  EXPECT_THAT(c->chief()->Log(), HasSubstr("checkpoint (final) failed"));
  for (const CommittedCheckpoint& ckpt : CommittedCheckpoints(dir)) EXPECT_NE(ckpt.id, 1);
  ExpectEveryShardAtVersion(dir, job.steps, c->Logs());
}

TEST(AsyncRecoveryTest, ChiefKilledMidJobResumesLiveAndAppliesEveryStepOnce) {
  AsyncJob job;
  const std::string dir = FreshTempDir("chief_killed");
  TrainingCluster::Options options;
  options.num_workers = kWorkers;
  options.job_file = JobFile(job, dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto before = c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 300; });
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_LT(before->steps_done(), job.steps - 400) << "the job ran too fast to kill the chief";
  auto resumed = c->KillAndRestartChief();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(resumed->resumed_from(), HasSubstr("live")) << c->Logs();
  EXPECT_GE(resumed->steps_done(), before->steps_done());
  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), job.steps);
  EXPECT_EQ(status->steps_lost(), 0);
  EXPECT_EQ(status->recoveries_size(), 0) << status->ShortDebugString();
  auto code = c->chief()->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << c->Logs();
  ExpectEveryShardAtVersion(dir, job.steps, c->Logs());
}

TEST(AsyncRecoveryTest, SigtermedChiefCheckpointsExitsFiveAndItsRestartLosesNothing) {
  AsyncJob job;
  job.every_steps = 100000;  // no checkpoint but the interrupt's and the final one
  const std::string dir = FreshTempDir("chief_sigterm");
  TrainingCluster::Options options;
  options.num_workers = kWorkers;
  options.job_file = JobFile(job, dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto before = c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 300; });
  ASSERT_TRUE(before.ok()) << before.status();
  ASSERT_LT(before->steps_done(), job.steps - 400) << "the job ran too fast to stop the chief";
  auto code = c->StopChief(SIGTERM);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 5) << c->Logs();
  // It checkpointed before it exited.
  std::vector<CommittedCheckpoint> checkpoints = CommittedCheckpoints(dir);
  ASSERT_EQ(checkpoints.size(), 1u) << c->Logs();
  const int64_t cut = checkpoints[0].manifest.progress.steps_done;
  EXPECT_GE(cut, before->steps_done());
  EXPECT_FALSE(checkpoints[0].manifest.final);
  EXPECT_THAT(c->chief()->Log(), HasSubstr("(interrupted) committed"));
  // The ps and workers stay up for the restarted chief.
  for (int i = 0; i < 2; ++i) EXPECT_TRUE(c->ps(i)->Running()) << "ps " << i;
  for (int i = 0; i < kWorkers; ++i) EXPECT_TRUE(c->worker(i)->Running()) << "worker " << i;

  ASSERT_TRUE(c->RestartChief().ok());
  auto resumed =
      c->WaitForStatus([](const JobStatus& s) { return s.state() != JobStatus::NO_JOB; });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(resumed->resumed_from(), HasSubstr("live")) << c->Logs();
  EXPECT_GE(resumed->steps_done(), cut);
  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), job.steps);
  EXPECT_EQ(status->steps_lost(), 0);
  ExpectEveryShardAtVersion(dir, job.steps, c->Logs());
}

}  // namespace
}  // namespace testing
}  // namespace shardps
