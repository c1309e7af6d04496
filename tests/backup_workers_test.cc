// Backup workers on a real local cluster (chief, 2 ps, 3 workers as processes) on the real
// Fashion-MNIST: one worker is a straggler (--test_only_delay_before_push_ms, a test aid
// that sleeps between its compute and its push), and a sync job with one backup worker
// (each sync step applied with the first 2 of its 3 gradients) still finishes with every
// sync step applied exactly once on every shard.
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

constexpr int kSyncSteps = 15;
constexpr int kReplicas = 3;

TEST(BackupWorkersTest, AStragglerDoesNotStopASyncJobAndEveryStepIsAppliedOnce) {
  TrainingCluster::Options options;
  options.num_workers = kReplicas;
  options.long_lived = true;  // the ps stay up after the job, to be read
  options.job_file = WriteTempFile(
      "backup.json",
      absl::StrCat(R"({"name": "backup", "model": "mlp:32", "batch_size": 32, "mode": "sync",)",
                   R"( "sync_backup_workers": 1, "steps": )", kSyncSteps * kReplicas,
                   R"(, "partitioner": "min_size:4096:2", "seed": 7, "backend": "cpu"})"));
  options.task_flags[{"worker", 2}] = {"--test_only_delay_before_push_ms=300"};
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(3));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->total_steps(), kSyncSteps * kReplicas);
  EXPECT_EQ(status->steps_done(), status->total_steps());
  EXPECT_EQ(status->job().sync_backup_workers(), 1);
  // A sync step counts the completions of the 2 replicas that made it up; the third was
  // superseded (the straggler's late gradient was dropped, or its replica never ran).
  int64_t by_workers = 0;
  for (const WorkerInfo& w : status->workers()) {
    by_workers += w.steps_done();
    EXPECT_EQ(w.failures(), 0) << "worker " << w.index() << ": " << w.error() << "\n"
                               << (*cluster)->Logs();
  }
  EXPECT_EQ(by_workers, kSyncSteps * (kReplicas - 1));
  std::cout << "steps counted per worker (worker 2 the straggler):";
  for (const WorkerInfo& w : status->workers()) std::cout << " " << w.steps_done();
  std::cout << "; " << status->elapsed_s() << " s\n";
  EXPECT_NE(status->workers(2).state(), "failed")
      << status->workers(2).error() << "\n" << (*cluster)->Logs();

  // Every shard applied each sync step once: its version is the number of sync steps.
  auto client = *(*cluster)->NewPsClient();
  ASSERT_TRUE(client->Discover().ok());
  ASSERT_FALSE(client->VariableNames().empty());
  for (const std::string& name : client->VariableNames()) {
    VariableLayout layout = *client->GetLayout(name);
    EXPECT_EQ(layout.shards.front().spec.update().replicas_to_aggregate(), kReplicas - 1);
    std::vector<float> values(layout.num_elements);
    PullVersions versions;
    ASSERT_TRUE(client->Pull(name, absl::MakeSpan(values), {}, &versions).ok());
    EXPECT_EQ(versions.min_version, kSyncSteps) << name;
    EXPECT_EQ(versions.max_version, kSyncSteps) << name;
  }
}

}  // namespace
}  // namespace testing
}  // namespace shardps
