// The sidecar mode over checkpoints written with the checkpoint library, holding softmax
// parameters trained on the real Fashion-MNIST; compared with the ps mode evaluating the
// same parameters from in-process ps tasks.
#include "evaluator/sidecar.h"


#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_dir.h"
#include "common/test_files.h"
#include "evaluator/job_follower.h"
#include "evaluator/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using testing::FakeChief;
using testing::RecordingHooks;
using testing::Status;
using testing::WriteSoftmaxCheckpoint;

class SidecarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::NewTempDir("sidecar") + "/ckpt";
    job_ = testing::SoftmaxJob("job-1", dir_);
    options_.checkpoint_dir = dir_;
    options_.device = &device_;
    options_.poll_interval = absl::Seconds(1);
    for (int steps : {10, 40, 80, 120}) params_[steps] = testing::TrainSoftmax(steps);
  }

  // Checkpoint `id` holding the parameters after `steps` steps.
  void Write(int64_t id, int steps, bool final = false) {
    ASSERT_TRUE(WriteSoftmaxCheckpoint(dir_, job_, id, params_.at(steps), steps, final).ok());
  }

  std::string CheckpointPath(int64_t id) const {
    char name[32];
    snprintf(name, sizeof(name), "/ckpt-%09lld", static_cast<long long>(id));
    return dir_ + name;
  }

  std::vector<int64_t> EvaluatedIds(const RecordingHooks& hooks) const {
    std::vector<int64_t> ids;
    for (const EvalRecord& record : hooks.evals) ids.push_back(record.metrics.checkpoint_id());
    return ids;
  }

  // The ps mode's final evaluation of `values` (from in-process ps tasks).
  EvalRecord EvaluateInPsMode(const std::vector<std::vector<float>>& values) {
    testing::LocalPs ps;
    EXPECT_TRUE(ps.CreateSoftmax("fm", values).ok());
    FakeChief chief;
    chief.Then(Status(job_, JobStatus::RUNNING, 1, /*training_done=*/true));
    JobFollowerOptions options;
    options.chief = &chief;
    options.device = &device_;
    options.connect_ps = [&ps](const std::vector<std::string>&) { return ps.Connect(); };
    RecordingHooks hooks;
    EXPECT_EQ(FollowChiefJobs(options, hooks.hooks), EvalOutcome::kSucceeded);
    EXPECT_EQ(hooks.evals.size(), 1u);
    return hooks.evals.empty() ? EvalRecord() : hooks.evals[0];
  }

  const ComputeDevice device_ = ComputeDevice::Cpu(1);
  std::string dir_;
  JobSpec job_;
  SidecarOptions options_;
  std::map<int, std::vector<std::vector<float>>> params_;
};

// Committed checkpoints 1, 2 and 5 (final); 3 interrupted (no manifest), 4 with a flipped
// byte in a data file. Each good one is evaluated once, in order, with exactly the metrics
// the ps mode gives the same parameters; the bad ones never are.
TEST_F(SidecarTest, EvaluatesEachCommittedCheckpointOnceAsThePsModeWould) {
  Write(1, 10);
  Write(2, 40);
  ASSERT_TRUE(testing::WriteSoftmaxCheckpointWithoutManifest(dir_, job_, 3, params_[80]).ok());
  Write(4, 80);
  const std::string corrupt = CheckpointPath(4) + "/" + CheckpointDir::DataFileName(0, 2);
  std::string bytes = ReadFileBytes(corrupt);
  bytes[bytes.size() - 100] ^= 0x08;
  WriteFileBytes(corrupt, bytes);
  Write(5, 120, /*final=*/true);

  RecordingHooks hooks;
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kSucceeded) << hooks.AllLogs();
  EXPECT_EQ(EvaluatedIds(hooks), (std::vector<int64_t>{1, 2, 5})) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("checkpoint 4"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("ps-00000-of-00002.safetensors"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("checkpoint 3"), 0) << hooks.AllLogs();

  const std::map<int64_t, int> steps_of = {{1, 10}, {2, 40}, {5, 120}};
  for (const EvalRecord& record : hooks.evals) {
    const int steps = steps_of.at(record.metrics.checkpoint_id());
    EXPECT_EQ(record.job_id, "job-1");
    EXPECT_EQ(record.metrics.steps_done(), steps);
    EXPECT_EQ(record.metrics.step(), steps);  // the shards' version
    EXPECT_EQ(record.metrics.examples(), 10000);
    EXPECT_EQ(record.final, record.metrics.checkpoint_id() == 5);
    const EvalRecord live = EvaluateInPsMode(params_[steps]);
    // The same code path: equal to the last bit.
    EXPECT_EQ(record.metrics.accuracy(), live.metrics.accuracy())
        << "checkpoint " << record.metrics.checkpoint_id();
    EXPECT_EQ(record.metrics.loss(), live.metrics.loss());
  }
  // Training moved the model: the checkpoints' accuracies differ.
  EXPECT_NE(hooks.evals[0].metrics.accuracy(), hooks.evals[2].metrics.accuracy());
}

// A sync job of 2 replicas: its manifest's job file states num_replicas 2, which the sidecar
// takes as is (it knows no worker count to check it against).
TEST_F(SidecarTest, EvaluatesASyncJobOfSeveralReplicas) {
  job_.set_mode(JobSpec::SYNC);
  job_.set_num_replicas(2);
  job_.set_steps_in_flight(1);
  job_.set_own_gradient(JobSpec::OWN_GRADIENT_IGNORE);
  Write(1, 40, /*final=*/true);
  RecordingHooks hooks;
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kSucceeded) << hooks.AllLogs();
  EXPECT_EQ(EvaluatedIds(hooks), (std::vector<int64_t>{1})) << hooks.AllLogs();
}

// Started before the job wrote anything: waits for the directory, then evaluates each new
// checkpoint as it is committed, and ends after the final one. New checkpoints count as
// signs of life for the orphan clock.
TEST_F(SidecarTest, WatchesNewCheckpointsUntilTheFinalOne) {
  RecordingHooks hooks;
  hooks.on_sleep = [this](int sleeps) {
    if (sleeps == 2) Write(1, 10);
    if (sleeps == 4) Write(2, 40);
    if (sleeps == 6) Write(3, 80, /*final=*/true);
  };
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kSucceeded) << hooks.AllLogs();
  EXPECT_EQ(EvaluatedIds(hooks), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(hooks.contacts, 3);
  EXPECT_EQ(hooks.LogsWith("waiting for the checkpoint directory"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.sleeps.size(), 6u);
}

TEST_F(SidecarTest, CheckpointPrunedWhileReadIsSkipped) {
  Write(1, 10);
  Write(2, 40);
  Write(3, 80, /*final=*/true);
  options_.before_read = [](const CommittedCheckpoint& checkpoint) {
    if (checkpoint.id == 2) std::filesystem::remove_all(checkpoint.path);
  };
  RecordingHooks hooks;
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kSucceeded);
  EXPECT_EQ(EvaluatedIds(hooks), (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(hooks.LogsWith("checkpoint 2"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("pruned while it was read"), 1) << hooks.AllLogs();
}

TEST_F(SidecarTest, UnreadableManifestIsSkippedAndLoggedOnce) {
  Write(1, 10);
  Write(2, 40);
  WriteFileBytes(CheckpointPath(2) + "/manifest.json", "{\"format\": \"shardps-checkpoint\", trunc");
  RecordingHooks hooks(/*max_sleeps=*/3);
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kStopped);
  EXPECT_EQ(EvaluatedIds(hooks), (std::vector<int64_t>{1}));
  EXPECT_EQ(hooks.LogsWith("skipping a checkpoint"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("ckpt-000000002"), 1) << hooks.AllLogs();
}

TEST_F(SidecarTest, LongLivedKeepsWatchingAfterTheFinalCheckpoint) {
  options_.long_lived = true;
  Write(1, 10, /*final=*/true);
  RecordingHooks hooks(/*max_sleeps=*/4);
  hooks.on_sleep = [this](int sleeps) {
    if (sleeps == 2) {
      // The job is started afresh in the same directory: a new job id, ids from 1 again.
      std::filesystem::remove_all(CheckpointPath(1));
      job_ = testing::SoftmaxJob("job-2", dir_);
      Write(1, 40);
    }
  };
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kStopped);
  ASSERT_EQ(hooks.evals.size(), 2u);
  EXPECT_EQ(hooks.evals[0].job_id, "job-1");
  EXPECT_EQ(hooks.evals[1].job_id, "job-2");
  EXPECT_EQ(hooks.evals[1].metrics.checkpoint_id(), 1);
}

// With a chief: every evaluation is reported with its checkpoint id and steps; when the
// chief says the job failed, what was committed is evaluated and the sidecar ends.
TEST_F(SidecarTest, ReportsToTheChiefAndEndsWhenItsJobFails) {
  FakeChief chief;
  options_.chief = &chief;
  chief.Then(Status(job_, JobStatus::RUNNING, 10));
  chief.Then(Status(job_, JobStatus::RUNNING, 40));
  chief.Then(Status(job_, JobStatus::FAILED, 40));
  Write(1, 10);
  RecordingHooks hooks;
  hooks.on_sleep = [this](int sleeps) {
    if (sleeps == 1) Write(2, 40);
  };
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kJobFailed) << hooks.AllLogs();
  EXPECT_EQ(EvaluatedIds(hooks), (std::vector<int64_t>{1, 2}));
  auto reports = chief.reports();
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports[0].job_id(), "job-1");
  EXPECT_EQ(reports[0].result().checkpoint_id(), 1);
  EXPECT_EQ(reports[0].result().steps_done(), 10);
  EXPECT_EQ(reports[1].result().checkpoint_id(), 2);
  EXPECT_EQ(reports[1].result().steps_done(), 40);
  EXPECT_FALSE(reports[1].final());
  EXPECT_EQ(hooks.contacts, 3 + 2);  // three answers, two new checkpoints
}

TEST_F(SidecarTest, ChiefThatIsDownDoesNotStopTheEvaluations) {
  FakeChief chief;  // never answers
  options_.chief = &chief;
  Write(1, 10);
  Write(2, 40, /*final=*/true);
  RecordingHooks hooks;
  EXPECT_EQ(RunSidecar(options_, hooks.hooks), EvalOutcome::kSucceeded);
  EXPECT_EQ(EvaluatedIds(hooks), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(hooks.LogsWith("chief unreachable"), 1) << hooks.AllLogs();
}

}  // namespace
}  // namespace shardps
