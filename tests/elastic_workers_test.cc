// Elastic workers as processes on localhost (docs/elastic.md): a worker daemon the chief's
// TF_CONFIG does not name joins a running async and a running sync job and takes steps; sent
// SIGTERM it leaves (its steps come back first) and exits 0; the job ends with every step
// applied exactly once (the final checkpoint holds each shard at the version the step count
// gives). A worker whose index is live elsewhere, or whose ps are another job's, is refused
// and exits 2 naming why.
#include <signal.h>

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checkpoint_testing.h"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

// Every worker's steps take a few ms more, so that the job outlasts a worker's start.
constexpr char kStepDelay[] = "--test_only_delay_before_push_ms=3";

std::string JobFile(const std::string& name, const std::string& mode, int64_t steps,
                    const std::string& dir) {
  return WriteTempFile(
      name + ".json",
      absl::StrCat(R"({"name": ")", name, R"(", "model": "mlp:64", "batch_size": 64, "mode": ")",
                   mode, R"(", "seed": 7, "backend": "cpu",)",
                   R"( "optimizer": {"type": "sgd", "learning_rate": 0.05},)",
                   R"( "partitioner": "min_size:65536:2", "steps": )", steps,
                   R"(, "checkpoint": {"dir": ")", dir, R"(", "every_steps": 200, "keep": 2}})"));
}

// A worker daemon at a new loopback address as task `index` of a cluster whose workers are
// `workers` plus it, the chief and the ps `ps` (the cluster's own, or others). `sparse`: its
// TF_CONFIG names only itself of the workers, as TFJob's enableDynamicWorker writes it.
absl::StatusOr<std::unique_ptr<Process>> StartExtraWorker(TrainingCluster* c, int index,
                                                          const std::string& address,
                                                          std::vector<std::string> ps,
                                                          bool sparse = false) {
  std::vector<std::string> workers = c->worker_addresses();
  for (size_t i = workers.size(); i < static_cast<size_t>(index); ++i) {
    workers.push_back(absl::StrCat("127.0.0.1:", 1 + i));  // tasks it need not reach
  }
  workers.resize(static_cast<size_t>(index));
  workers.push_back(address);
  std::map<std::string, std::vector<std::string>> cluster = {
      {"chief", {c->chief_address()}}, {"ps", ps}, {"worker", workers}};
  std::string tf_config = MakeTfConfig(cluster, "worker", index);
  if (sparse) {
    tf_config = absl::StrCat(R"({"cluster": {"chief": [")", c->chief_address(), R"("], "ps": [")",
                             absl::StrJoin(ps, R"(", ")"), R"("], "worker": {")", index,
                             R"(": ")", address, R"("}}, "task": {"type": "worker", "index": )",
                             index, "}}");
  }
  return Process::Start(BinaryPath("worker/worker"),
                        {"--threads=1", "--backend=cpu", kStepDelay},
                        {{"TF_CONFIG", tf_config}},
                        absl::StrCat(TempDir(), "/extra-worker-", index, "-",
                                     address.substr(0, address.find(':')), ".log"));
}

void ExpectEveryShardAtVersion(const std::string& dir, int64_t version, const std::string& logs) {
  std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
  ASSERT_FALSE(all.empty()) << "no checkpoint in " << dir << "\n" << logs;
  ASSERT_TRUE(all[0].manifest.final) << all[0].path << "\n" << logs;
  const std::map<std::string, int64_t> versions = ManifestShardVersions(all[0].manifest);
  ASSERT_FALSE(versions.empty());
  for (const auto& [shard, v] : versions) EXPECT_EQ(v, version) << shard;
}

// With `workers` in TF_CONFIG (a sync job's replicas), one more joins, takes steps, leaves on
// SIGTERM (exit 0), and the job counts every step once.
void JoinTrainLeave(const std::string& mode, int workers, bool sparse) {
  SCOPED_TRACE(mode);
  constexpr int64_t kSteps = 2000;
  const std::string dir = FreshTempDir("elastic_" + mode);
  TrainingCluster::Options options;
  options.num_workers = workers;
  options.worker_flags = {kStepDelay};
  options.job_file = JobFile("el" + mode, mode, kSteps, dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  ASSERT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 20; }).ok())
      << c->Logs();

  const std::string address = LoopbackAddress();
  auto extra = StartExtraWorker(c, workers, address, c->ps_addresses(), sparse);
  ASSERT_TRUE(extra.ok()) << extra.status();
  auto working = c->WaitForStatus([workers](const JobStatus& s) {
    return s.workers_size() == workers + 1 && s.workers(workers).steps_done() >= 10;
  });
  ASSERT_TRUE(working.ok()) << working.status() << "\n" << (*extra)->Log() << c->Logs();
  EXPECT_EQ(working->workers(workers).index(), workers);
  EXPECT_EQ(working->workers(workers).source(), "joined");
  // The TF_CONFIG workers announce themselves too, as soon as the chief answers them.
  EXPECT_GE(working->worker_joins(), 1);
  EXPECT_THAT((*extra)->Log(), HasSubstr("joined job"));
  // shardctl workers lists it, as joined.
  std::string listed;
  auto listing = RunCommand(BinaryPath("coordinator/cli/shardctl"),
                            {"workers", "--chief=" + c->chief_address()}, {}, &listed);
  ASSERT_TRUE(listing.ok()) << listing.status();
  EXPECT_EQ(*listing, 0) << listed;
  EXPECT_THAT(listed, HasSubstr(address));
  EXPECT_THAT(listed, HasSubstr("joined"));

  (*extra)->Signal(SIGTERM);
  auto code = (*extra)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*extra)->Log();
  EXPECT_THAT((*extra)->Log(), HasSubstr("left the job"));

  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << c->Logs();
  EXPECT_EQ(done->steps_done(), kSteps);
  EXPECT_EQ(done->worker_leaves(), 1);
  ASSERT_EQ(done->workers_size(), workers + 1);
  EXPECT_TRUE(done->workers(workers).left());
  int64_t by_workers = 0;
  for (const WorkerInfo& w : done->workers()) by_workers += w.steps_done();
  EXPECT_EQ(by_workers, kSteps);
  // Async: each step updates each shard once. Sync: the replicas stay as submitted (one per
  // TF_CONFIG worker), each sync step updates each shard once.
  ExpectEveryShardAtVersion(dir, mode == "sync" ? kSteps / workers : kSteps, c->Logs());
}

// The new worker's TF_CONFIG names only itself of the workers (TFJob's sparse form).
TEST(ElasticWorkersTest, AWorkerJoinsARunningAsyncJobAndLeavesOnSigterm) {
  JoinTrainLeave("async", 1, /*sparse=*/true);
}

// Two replicas per sync step, from the two TF_CONFIG workers; a third takes replicas too.
TEST(ElasticWorkersTest, AWorkerJoinsARunningSyncJobAndLeavesOnSigterm) {
  JoinTrainLeave("sync", 2, /*sparse=*/false);
}

// A restarted chief knows only its TF_CONFIG's workers: the one that had joined hears nothing
// from it, announces itself again, and takes steps from the new chief; the job still counts
// every step once.
TEST(ElasticWorkersTest, AJoinedWorkerJoinsARestartedChiefAgain) {
  constexpr int64_t kSteps = 8000;  // outlasts the restart and the worker's silence (8 s)
  const std::string dir = FreshTempDir("elastic_chief_restart");
  TrainingCluster::Options options;
  options.num_workers = 1;
  options.worker_flags = {kStepDelay};
  options.job_file = JobFile("elrc", "async", kSteps, dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  ASSERT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 20; }).ok())
      << c->Logs();
  auto extra = StartExtraWorker(c, 1, LoopbackAddress(), c->ps_addresses());
  ASSERT_TRUE(extra.ok()) << extra.status();
  ASSERT_TRUE(c->WaitForStatus([](const JobStatus& s) {
                 return s.workers_size() == 2 && s.workers(1).steps_done() >= 10;
               }).ok())
      << (*extra)->Log() << c->Logs();
  auto restarted = c->KillAndRestartChief();
  ASSERT_TRUE(restarted.ok()) << restarted.status() << c->Logs();
  auto again = c->WaitForStatus(
      [](const JobStatus& s) {
        for (const WorkerInfo& w : s.workers()) {
          if (w.index() == 1 && w.steps_done() >= 5) return true;
        }
        return s.state() != JobStatus::RUNNING;
      },
      absl::Minutes(1));
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << (*extra)->Log() << c->Logs();
  ASSERT_EQ(again->state(), JobStatus::RUNNING) << "the job ended before worker 1 came back";
  EXPECT_THAT((*extra)->Log(), HasSubstr("joined again"));
  (*extra)->Signal(SIGTERM);
  auto code = (*extra)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*extra)->Log();
  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << c->Logs();
  ExpectEveryShardAtVersion(dir, kSteps, c->Logs());
}

TEST(ElasticWorkersTest, RefusedWorkersExitTwoNamingWhy) {
  const std::string dir = FreshTempDir("elastic_refused");
  TrainingCluster::Options options;
  options.num_workers = 1;
  options.job_file = JobFile("elr", "async", 100000, dir);
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  ASSERT_TRUE(c->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 5; }).ok())
      << c->Logs();
  // Index 0 is live at another address.
  auto twin = StartExtraWorker(c, 0, LoopbackAddress(), c->ps_addresses());
  ASSERT_TRUE(twin.ok()) << twin.status();
  auto code = (*twin)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2) << (*twin)->Log();
  EXPECT_THAT((*twin)->Log(), HasSubstr("is live at"));
  // Another job's worker: its TF_CONFIG names other ps.
  auto stranger = StartExtraWorker(c, 3, LoopbackAddress(), {"127.0.0.1:9", "127.0.0.1:10"});
  ASSERT_TRUE(stranger.ok()) << stranger.status();
  code = (*stranger)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2) << (*stranger)->Log();
  EXPECT_THAT((*stranger)->Log(), HasSubstr("another job"));
  auto status = c->Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->workers_size(), 1) << "a refused worker was added";
  EXPECT_LE(status->worker_joins(), 1) << "only worker 0 itself may have joined";
  EXPECT_EQ(status->state(), JobStatus::RUNNING);
}

}  // namespace
}  // namespace testing
}  // namespace shardps
