// Async training converges as well as sync training: a 1-worker async job with
// the default update settings ends with a training loss within 10% of the same job run in
// sync mode, on a real local cluster (chief, 2 ps, 1 worker as processes) and the real
// Fashion-MNIST.
//
// The loss compared is the chief's JobStatus.loss at the end: the mean training loss of the
// job's last 50 steps, the same 50 batches in both modes (same seed, same batch order). It is
// a loss check only, with no clock in it. The test also runs the old default, two steps in
// flight each computed on parameters without the worker's own last update (apply_own_gradient
// off), and checks that it ends measurably worse than sync, so that the comparison keeps its
// teeth.
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

// The time-to-accuracy benchmark's job (bench/time_to_accuracy.cc), for fewer steps.
std::string Job(const std::string& mode, const std::string& extra) {
  return absl::StrCat(
      R"({"name": "conv", "model": "mlp:256,128", "dataset": "fashion_mnist", )",
      R"("batch_size": 256, "steps": 900, )",
      R"("optimizer": {"type": "adam", "learning_rate": 0.001}, "mode": ")", mode,
      R"(", "partitioner": "min_size:262144:4", "seed": 42, "backend": "cpu")", extra, "}");
}

// Runs the job to the end and returns its final status (loss: the mean over the last 50 steps).
JobStatus Train(const std::string& mode, const std::string& extra) {
  TrainingCluster::Options options;
  options.num_workers = 1;
  options.job_file = WriteTempFile(absl::StrCat("conv-", mode, ".json"), Job(mode, extra));
  auto cluster = TrainingCluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  if (!cluster.ok()) return {};
  auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(8));
  EXPECT_TRUE(status.ok()) << status.status();
  if (!status.ok()) return {};
  EXPECT_EQ(status->steps_done(), 900);
  EXPECT_GT(status->loss(), 0);
  return *status;
}

TEST(ConvergenceTest, OneWorkerAsyncEndsWithinTenPercentOfSync) {
  const JobStatus sync = Train("sync", "");
  const JobStatus async = Train("async", "");  // the defaults: 2 steps in flight, own gradient
  ASSERT_GT(sync.loss(), 0);
  ASSERT_GT(async.loss(), 0);
  EXPECT_EQ(async.job().steps_in_flight(), 2) << "the test is meant for the overlapping default";
  EXPECT_LE(async.loss(), 1.10 * sync.loss())
      << "async " << async.loss() << ", sync " << sync.loss() << " (mean over the last 50 steps)";

  // The old default: the same overlap, without the worker's own last update.
  const JobStatus stale = Train("async", R"(, "apply_own_gradient": false)");
  ASSERT_GT(stale.loss(), 0);
  std::cout << "training loss over the last 50 steps: sync " << sync.loss() << ", async "
            << async.loss() << " (" << async.loss() / sync.loss() << " of sync), async without "
            << "its own last update " << stale.loss() << " (" << stale.loss() / sync.loss()
            << ")\n";
  EXPECT_GT(stale.loss(), 1.10 * sync.loss())
      << "without its own last update the async job should end worse than sync: async "
      << stale.loss() << ", sync " << sync.loss() << "; if this no longer holds, the check above "
      << "no longer shows anything";
}

}  // namespace
}  // namespace testing
}  // namespace shardps
