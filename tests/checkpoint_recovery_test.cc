// A job's checkpoint directory across whole-cluster restarts, as processes on localhost: a
// corrupt newest checkpoint is detected and skipped, a checkpoint written by 2 ps under one
// partitioner restores exactly into 3 ps under another, a finished job is not trained
// again, an unwritable directory does not stop training (shardctl shows why), and a
// cancelled job ends without waiting for a final evaluation.
#include <signal.h>

#include <nlohmann/json.hpp>
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

struct Job {
  std::string name = "cr";
  std::string mode = "async";
  std::string partitioner = "min_size:65536:2";
  int64_t steps = 1500;
  int64_t every_steps = 100;
};

std::string JobJson(const Job& job, const std::string& checkpoint_dir) {
  return absl::StrCat(R"({"name": ")", job.name, R"(", "model": "mlp:64", "batch_size": 64,)",
                      R"( "mode": ")", job.mode, R"(", "seed": 7, "backend": "cpu",)",
                      R"( "optimizer": {"type": "adam", "learning_rate": 0.002},)",
                      R"( "partitioner": ")", job.partitioner, R"(", "steps": )", job.steps,
                      R"(, "checkpoint": {"dir": ")", checkpoint_dir,
                      R"(", "every_steps": )", job.every_steps, R"(, "keep": 3}})");
}

std::string JobFile(const Job& job, const std::string& checkpoint_dir) {
  return WriteTempFile(job.name + ".json", JobJson(job, checkpoint_dir));
}

// Runs the real shardctl against `chief`; its exit code, and its output in `out`.
int Shardctl(const std::string& chief, std::vector<std::string> args, std::string* out) {
  args.push_back(absl::StrCat("--chief=", chief));
  auto code =
      RunCommand(BinaryPath("coordinator/cli/shardctl"), args, {}, out, absl::Seconds(120));
  EXPECT_TRUE(code.ok()) << code.status();
  return code.ok() ? *code : -1;
}

// Every shard of the final checkpoint of `dir` at version `steps`: each async step applied
// exactly once.
void ExpectFinalAtVersion(const std::string& dir, int64_t steps) {
  std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
  ASSERT_FALSE(all.empty()) << dir;
  ASSERT_TRUE(all[0].manifest.final) << all[0].path;
  for (const auto& [shard, version] : ManifestShardVersions(all[0].manifest)) {
    EXPECT_EQ(version, steps) << shard;
  }
}

TEST(CheckpointRecoveryTest, ACorruptNewestCheckpointIsSkippedAfterAWholeClusterRestart) {
  Job job;
  const std::string dir = FreshTempDir("corrupt");
  const std::string job_file = JobFile(job, dir);
  {
    TrainingCluster::Options options;
    options.job_file = job_file;
    auto cluster = TrainingCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto status = (*cluster)->WaitForStatus([](const JobStatus& s) {
      return s.has_checkpoint() && s.last_checkpoint().id() >= 2;
    });
    ASSERT_TRUE(status.ok()) << status.status();
    ASSERT_LT(status->steps_done(), job.steps - 300) << "the job ran too fast to stop it";
    (*cluster)->SignalAll(SIGKILL);  // the whole cluster is lost
  }
  std::vector<CommittedCheckpoint> before = CommittedCheckpoints(dir);
  ASSERT_GE(before.size(), 2u);
  const CommittedCheckpoint& newest = before[0];
  const CommittedCheckpoint& older = before[1];
  ASSERT_FALSE(newest.manifest.final);
  // A byte of ps 0's copy of the first kernel shard goes bad on disk.
  const std::string file = "ps-00000-of-00002.safetensors";
  const std::string tensor = absl::StrCat(job.name, "/dense_0/kernel/part_0");
  ASSERT_TRUE(FlipByteInTensor(newest, file, tensor).ok());

  TrainingCluster::Options options;  // fresh ps, fresh workers, the same job and directory
  options.job_file = job_file;
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto resumed =
      c->WaitForStatus([](const JobStatus& s) { return s.state() != JobStatus::NO_JOB; });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  const std::string& from = resumed->resumed_from();
  EXPECT_THAT(from, HasSubstr(absl::StrCat("checkpoint ", older.id, " (step ",
                                           older.manifest.progress.steps_done, ")")))
      << c->Logs();
  EXPECT_THAT(from, HasSubstr(absl::StrCat("skipped checkpoint ", newest.id, ": ")));
  EXPECT_THAT(from, HasSubstr(file));
  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), job.steps);
  ExpectFinalAtVersion(dir, job.steps);
}

TEST(CheckpointRecoveryTest, ACheckpointOfTwoPsRestoresExactlyIntoThreePsUnderAnotherPartitioner) {
  Job job;
  job.partitioner = "fixed:2";
  job.steps = 800;
  job.every_steps = 100000;  // only the SIGTERM's checkpoint
  const std::string dir = FreshTempDir("reshard");
  CommittedCheckpoint written;
  {
    TrainingCluster::Options options;
    options.num_ps = 2;
    options.job_file = JobFile(job, dir);
    auto cluster = TrainingCluster::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    auto status =
        (*cluster)->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 200; });
    ASSERT_TRUE(status.ok()) << status.status();
    ASSERT_LT(status->steps_done(), job.steps - 200) << "the job ran too fast to stop it";
    auto code = (*cluster)->StopChief(SIGTERM);  // checkpoints, exits 5
    ASSERT_TRUE(code.ok()) << code.status();
    ASSERT_EQ(*code, 5) << (*cluster)->Logs();
    std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
    ASSERT_EQ(all.size(), 1u) << (*cluster)->Logs();
    written = all[0];
  }
  const ManifestVariable* kernel2 = written.manifest.FindVariable("cr/dense_0/kernel");
  ASSERT_NE(kernel2, nullptr);
  EXPECT_EQ(kernel2->shards.size(), 2u);
  const int64_t cut = written.manifest.progress.steps_done;

  // The same job on 3 ps under fixed:3. Its workers are not started, so nothing trains
  // between the restore and the checkpoint taken right after it.
  job.partitioner = "fixed:3";
  TrainingCluster::Options options;
  options.num_ps = 3;
  options.job_file = JobFile(job, dir);
  options.start_workers = false;
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto resumed = c->WaitForStatus([](const JobStatus& s) { return s.state() != JobStatus::NO_JOB; });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(resumed->resumed_from(),
              HasSubstr(absl::StrCat("checkpoint ", written.id, " (step ", cut, ")")))
      << c->Logs();
  EXPECT_EQ(resumed->steps_done(), cut);
  std::string out;
  ASSERT_EQ(Shardctl(c->chief_address(), {"checkpoint", "--json"}, &out), 0) << out << c->Logs();
  nlohmann::json info = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(info.is_object() && info.contains("id")) << out;
  EXPECT_EQ(info["steps_done"], cut) << out;
  std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
  ASSERT_FALSE(all.empty());
  const CommittedCheckpoint& rewritten = all[0];
  ASSERT_EQ(rewritten.id, info["id"].get<int64_t>());
  const ManifestVariable* kernel3 = rewritten.manifest.FindVariable("cr/dense_0/kernel");
  ASSERT_NE(kernel3, nullptr);
  EXPECT_EQ(kernel3->shards.size(), 3u);
  EXPECT_EQ(rewritten.manifest.files.size(), 3u);
  // Every variable's parameters and Adam slots, bit for bit, and the optimizer's step counts.
  absl::Status same = SameModel(written.path, rewritten.path, /*with_slots=*/true);
  EXPECT_TRUE(same.ok()) << same;
  for (const auto& [shard, version] : ManifestShardVersions(rewritten.manifest)) {
    EXPECT_EQ(version, cut) << shard;
  }

  // And the job trains on to its end on the new layout.
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(c->StartWorker(i).ok());
  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  ExpectFinalAtVersion(dir, job.steps);
}

TEST(CheckpointRecoveryTest, AFinishedJobStartedAgainTrainsNothing) {
  Job job;
  job.steps = 300;
  const std::string dir = FreshTempDir("finished");
  TrainingCluster::Options options;
  options.job_file = JobFile(job, dir);
  // The ps and workers outlive the chief, so that its second run could reach them.
  options.ps_flags = {"--long_lived"};
  options.worker_flags = {"--long_lived"};
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto code = c->chief()->Wait(absl::Minutes(3));
  ASSERT_TRUE(code.ok()) << code.status() << c->Logs();
  ASSERT_EQ(*code, 0) << c->Logs();
  auto client = c->NewPsClient();
  ASSERT_TRUE(client.ok());
  auto after_job = LiveVersions(client->get());
  ASSERT_TRUE(after_job.ok()) << after_job.status();
  ASSERT_FALSE(after_job->empty());
  for (const auto& [variable, v] : *after_job) {
    EXPECT_EQ(v.min_version, job.steps) << variable;
    EXPECT_EQ(v.max_version, job.steps) << variable;
  }
  const size_t checkpoints = CommittedCheckpoints(dir).size();

  ASSERT_TRUE(c->RestartChief().ok());  // the same job file and directory
  code = c->chief()->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status() << c->Logs();
  EXPECT_EQ(*code, 0) << c->Logs();
  EXPECT_THAT(c->chief()->Log(), HasSubstr("had already finished")) << c->Logs();
  // No worker ran a step: every shard is where the job left it; no checkpoint was added.
  auto again = LiveVersions(client->get());
  ASSERT_TRUE(again.ok()) << again.status();
  for (const auto& [variable, v] : *again) {
    EXPECT_EQ(v.min_version, job.steps) << variable;
    EXPECT_EQ(v.max_version, job.steps) << variable;
  }
  EXPECT_EQ(CommittedCheckpoints(dir).size(), checkpoints);
}

TEST(CheckpointRecoveryTest, AnUnwritableDirectoryIsShownAndTrainingGoesOn) {
  Job job;
  job.steps = 300;
  // Root writes anywhere, but no one makes a directory inside a regular file.
  const std::string file = WriteTempFile("not_a_directory", "");
  TrainingCluster::Options options;
  options.long_lived = true;
  options.job_file = JobFile(job, file + "/ckpt");
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto status = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), job.steps);
  EXPECT_FALSE(status->has_checkpoint());
  std::string out;
  ASSERT_EQ(Shardctl(c->chief_address(), {"status"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("CHECKPOINT FAILED"));
  EXPECT_THAT(out, HasSubstr(file));
}

TEST(CheckpointRecoveryTest, ACancelledJobEndsWithoutWaitingForAFinalEvaluation) {
  Job job;
  job.steps = 1000000;
  const std::string dir = FreshTempDir("cancelled");
  TrainingCluster::Options options;
  options.evaluator = true;
  options.job_file = JobFile(job, dir);
  // A job that ends well waits this long for the evaluator's final evaluation.
  options.chief_flags = {"--final_eval_timeout_s=600"};
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto running = c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 100; });
  ASSERT_TRUE(running.ok()) << running.status();
  // The evaluator follows the job before it is cancelled (one that only ever sees the job
  // ended waits for a running one: JobFollowerTest.JobThatEndedBeforeItWasSeenIsNotFollowed).
  ASSERT_TRUE(c->evaluator()->WaitForLog("following job", absl::Seconds(60))) << c->Logs();
  std::string out;
  ASSERT_EQ(Shardctl(c->chief_address(), {"cancel"}, &out), 0) << out;
  // The chief ends at once (not after the 600 s a final evaluation may take) with 4, and the
  // evaluator, which makes no final evaluation of a cancelled job, with 4.
  auto chief = c->chief()->Wait(absl::Seconds(60));
  ASSERT_TRUE(chief.ok()) << chief.status() << "\n" << c->Logs();
  EXPECT_EQ(*chief, 4) << c->Logs();
  auto evaluator = c->evaluator()->Wait(absl::Seconds(60));
  ASSERT_TRUE(evaluator.ok()) << evaluator.status() << "\n" << c->Logs();
  EXPECT_EQ(*evaluator, 4) << c->Logs();
  EXPECT_THAT(c->chief()->Log(), HasSubstr("CANCELLED"));
}

}  // namespace
}  // namespace testing
}  // namespace shardps
