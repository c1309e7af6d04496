// Adding and removing ps tasks in a running sync job, as processes on localhost
// (docs/elastic.md): TF_CONFIG names three ps, the job starts on two (num_ps), `shardctl
// scale-ps 3` moves it onto three and `scale-ps 2` back, the removed ps exits 0, and the job
// ends bit-identical (parameters and optimizer slots) to an undisturbed run on two ps, every
// step applied once. Refused scales change nothing; a chief killed while a scale is under
// way leaves a consistent job that a restarted chief finishes, bit-identical too.
#include <signal.h>

#include <functional>
#include <iostream>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/checkpoint_testing.h"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kSteps = 1600;  // worker steps: 800 sync steps of 2 replicas
constexpr int kWorkers = 2;
// Every step takes a few ms more, so that the scales land mid-job on a fast machine too.
constexpr char kStepDelay[] = "--test_only_delay_before_push_ms=4";

std::string SyncJob(const std::string& checkpoint_dir, int num_ps) {
  return WriteTempFile(
      absl::StrCat("scale_", num_ps, ".json"),
      absl::StrCat(R"({"name": "sc", "model": "mlp:64", "batch_size": 64, "mode": "sync",)",
                   R"( "optimizer": {"type": "adam", "learning_rate": 0.002}, "seed": 7,)",
                   R"( "partitioner": "min_size:4096:ps", "backend": "cpu", "steps": )", kSteps,
                   R"(, "num_ps": )", num_ps, R"(, "checkpoint": {"dir": ")", checkpoint_dir,
                   R"(", "every_steps": 400, "keep": 3}})"));
}

absl::StatusOr<std::string> FinalCheckpoint(const std::string& dir) {
  std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
  if (all.empty()) return absl::NotFoundError(absl::StrCat("no checkpoint in ", dir));
  if (!all[0].manifest.final || all[0].manifest.progress.steps_done != kSteps) {
    return absl::FailedPreconditionError(
        absl::StrCat("the newest checkpoint of ", dir, " is not the final one: ", all[0].path));
  }
  return all[0].path;
}

// An undisturbed run on two ps (TF_CONFIG's two), once per test process.
const absl::StatusOr<std::string>& Reference() {
  static const absl::StatusOr<std::string>* reference = [] {
    const std::string dir = FreshTempDir("scale_reference");
    TrainingCluster::Options options;
    options.num_ps = 2;
    options.num_workers = kWorkers;
    options.job_file = SyncJob(dir, 0);
    auto cluster = TrainingCluster::Start(options);
    if (!cluster.ok()) return new absl::StatusOr<std::string>(cluster.status());
    auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
    if (!status.ok()) return new absl::StatusOr<std::string>(status.status());
    return new absl::StatusOr<std::string>(FinalCheckpoint(dir));
  }();
  return *reference;
}

// shardctl against the cluster's chief: its exit code, its output in *out.
int Shardctl(TrainingCluster* c, std::vector<std::string> args, std::string* out) {
  args.push_back("--chief=" + c->chief_address());
  absl::StatusOr<int> code = RunCommand(BinaryPath("coordinator/cli/shardctl"), args, {}, out,
                                        absl::Minutes(2));
  if (!code.ok()) {
    *out = code.status().ToString();
    return -1;
  }
  return *code;
}

void ExpectFinalBitIdentical(TrainingCluster* c, const std::string& dir) {
  const auto& reference = Reference();
  ASSERT_TRUE(reference.ok()) << reference.status();
  auto final_checkpoint = FinalCheckpoint(dir);
  ASSERT_TRUE(final_checkpoint.ok()) << final_checkpoint.status() << "\n" << c->Logs();
  absl::Status same = SameModel(*reference, *final_checkpoint, /*with_slots=*/true);
  EXPECT_TRUE(same.ok()) << same << "\n" << c->Logs();
  // Every sync step applied once to every shard.
  const std::vector<CommittedCheckpoint> all = CommittedCheckpoints(dir);
  for (const auto& [shard, v] : ManifestShardVersions(all[0].manifest)) {
    EXPECT_EQ(v, kSteps / kWorkers) << shard;
  }
}

// A cluster of TF_CONFIG's 3 ps whose sync job starts on 2 (num_ps), its workers' steps
// slowed by kStepDelay; `configure` adds flags. Returns once the job has done 100 steps.
absl::StatusOr<std::unique_ptr<TrainingCluster>> StartOnTwoOfThreePs(
    const std::string& dir, const std::function<void(TrainingCluster::Options*)>& configure = {}) {
  TrainingCluster::Options options;
  options.num_ps = 3;
  options.num_workers = kWorkers;
  options.worker_flags = {kStepDelay};
  options.job_file = SyncJob(dir, 2);
  if (configure) configure(&options);
  ASSIGN_OR_RETURN(std::unique_ptr<TrainingCluster> cluster, TrainingCluster::Start(options));
  RETURN_IF_ERROR(cluster
                      ->WaitForStatus([](const JobStatus& s) { return s.steps_done() >= 100; })
                      .status());
  return cluster;
}

// `shardctl scale-ps 3` started in the background (its output in TempDir()/`log`); returns
// once the chief's status says the job is scaling (past the cut), with the status then.
absl::StatusOr<std::unique_ptr<Process>> ScaleToThreeInBackground(TrainingCluster* c,
                                                                  const std::string& log,
                                                                  JobStatus* mid) {
  ASSIGN_OR_RETURN(std::unique_ptr<Process> scaling,
                   Process::Start(BinaryPath("coordinator/cli/shardctl"),
                                  {"scale-ps", "3", "--chief=" + c->chief_address()}, {},
                                  absl::StrCat(TempDir(), "/", log)));
  ASSIGN_OR_RETURN(*mid, c->WaitForStatus([](const JobStatus& s) {
    return absl::StartsWith(s.phase(), "scaling");
  }));
  return scaling;
}

TEST(ElasticPsTest, SyncJobScaledTwoThreeTwoEndsBitIdenticalToAnUnscaledRun) {
  const std::string dir = FreshTempDir("scaled");
  auto cluster = StartOnTwoOfThreePs(dir);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  auto started = c->WaitForStatus([](const JobStatus&) { return true; });
  ASSERT_TRUE(started.ok()) << started.status() << "\n" << c->Logs();
  ASSERT_EQ(started->ps_size(), 2) << "num_ps 2 of TF_CONFIG's 3";

  // Refused: nothing moves.
  std::string out;
  EXPECT_EQ(Shardctl(c, {"scale-ps", "2"}, &out), 2) << out;
  EXPECT_THAT(out, HasSubstr("already runs on 2 ps"));
  const std::string nowhere = LoopbackAddress();  // nothing listens there
  EXPECT_EQ(Shardctl(c, {"scale-ps", "3", "--ps_timeout=1",
                         "--ps_addresses=" + c->ps_addresses()[0] + "," +
                             c->ps_addresses()[1] + "," + nowhere},
                     &out),
            1)
      << out;
  EXPECT_THAT(out, HasSubstr("did not answer"));
  EXPECT_EQ(Shardctl(c, {"scale-ps", "0"}, &out), 2) << out;
  JobStatus now = *c->WaitForStatus([](const JobStatus&) { return true; });
  EXPECT_EQ(now.layout_version(), 1);
  // The count that reached the chief's queue: the one whose ps never answered.
  EXPECT_EQ(now.ps_scales_failed(), 1) << now.ShortDebugString();

  // Up: ps 2 takes a third of every variable.
  ASSERT_LT(now.steps_done(), kSteps - 600) << "the job ran too fast to scale mid-job";
  ASSERT_EQ(Shardctl(c, {"scale-ps", "3"}, &out), 0) << out << c->Logs();
  EXPECT_THAT(out, HasSubstr("from 2 to 3 ps"));
  // (The chief's monitor probes the new set at once; ps 2's bytes show with its answer.)
  auto on_three = c->WaitForStatus([](const JobStatus& s) {
    return s.layout_version() == 2 && s.ps_size() == 3 && s.ps(2).bytes() > 0;
  });
  ASSERT_TRUE(on_three.ok()) << on_three.status();
  EXPECT_EQ(Shardctl(c, {"status"}, &out), 0) << out;
  EXPECT_THAT(out, HasSubstr("layout version 2"));
  const int64_t at_up = on_three->last_scale().steps_done();
  ASSERT_TRUE(c->WaitForStatus([at_up](const JobStatus& s) {
                 return s.steps_done() >= at_up + 200;
               }).ok());

  // Down: the highest ps hands off and exits 0.
  ASSERT_EQ(Shardctl(c, {"scale-ps", "2"}, &out), 0) << out << c->Logs();
  EXPECT_THAT(out, HasSubstr("from 3 to 2 ps"));
  auto exited = c->ps(2)->Wait(absl::Seconds(30));
  ASSERT_TRUE(exited.ok()) << exited.status() << "\n" << c->Logs();
  EXPECT_EQ(*exited, 0) << c->ps(2)->Log();

  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << c->Logs();
  EXPECT_EQ(done->steps_done(), kSteps);
  EXPECT_EQ(done->layout_version(), 3);
  EXPECT_EQ(done->ps_scales(), 2);
  EXPECT_EQ(done->steps_lost(), 0);
  EXPECT_EQ(done->recoveries_size(), 0) << done->ShortDebugString();
  ExpectFinalBitIdentical(c, dir);
}

// The chief is killed while a scale is under way (its checkpoint files held back by the ps,
// so that the kill lands inside the scale); the restarted chief resumes the job on a
// consistent layout, a new scale completes, and the job ends bit-identical.
TEST(ElasticPsTest, AChiefKilledMidScaleLeavesAJobTheRestartedChiefFinishes) {
  const std::string dir = FreshTempDir("chief_killed_mid_scale");
  auto cluster = StartOnTwoOfThreePs(dir, [](TrainingCluster::Options* o) {
    o->ps_flags = {"--test_snapshot_write_delay_ms=1500"};
  });
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  JobStatus mid;
  auto scaling = ScaleToThreeInBackground(c, "scale-killed.log", &mid);
  ASSERT_TRUE(scaling.ok()) << scaling.status() << "\n" << c->Logs();
  auto resumed = c->KillAndRestartChief();
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  std::cout << "chief killed at \"" << mid.phase() << "\"; the restarted chief resumed from "
            << resumed->resumed_from() << " on " << resumed->ps_size() << " ps\n";
  (void)(*scaling)->Wait(absl::Seconds(30));  // its chief is gone: it fails

  // Whatever the kill interrupted, the job runs on one layout; scale it to three again.
  auto training = c->WaitForStatus([](const JobStatus& s) {
    return s.state() == JobStatus::RUNNING && s.phase().empty();
  });
  ASSERT_TRUE(training.ok()) << training.status() << "\n" << c->Logs();
  std::string out;
  if (training->ps_size() == 2) {
    ASSERT_EQ(Shardctl(c, {"scale-ps", "3"}, &out), 0) << out << c->Logs();
  }
  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << c->Logs();
  EXPECT_EQ(done->steps_done(), kSteps);
  EXPECT_EQ(done->ps_size(), 3);
  ExpectFinalBitIdentical(c, dir);
}

// The new ps is killed while the scale is under way (after the cut, before the restore, which
// the old ps' held-back checkpoint files delay): the scale fails, the chief puts the old
// layout back and rolls the two ps back to the scale's own cut, no step is lost, and the job
// ends on two ps bit-identical to the unscaled run.
TEST(ElasticPsTest, ANewPsKilledMidScaleLeavesTheJobOnTheOldPs) {
  const std::string dir = FreshTempDir("ps_killed_mid_scale");
  // Only the old ps hold their files back: the cut waits, the new ps is not slowed.
  auto cluster = StartOnTwoOfThreePs(dir, [](TrainingCluster::Options* o) {
    for (int k : {0, 1}) o->task_flags[{"ps", k}] = {"--test_snapshot_write_delay_ms=1500"};
  });
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  TrainingCluster* c = cluster->get();
  JobStatus mid;
  auto scaling = ScaleToThreeInBackground(c, "scale-ps-killed.log", &mid);
  ASSERT_TRUE(scaling.ok()) << scaling.status() << "\n" << c->Logs();
  auto killed = c->StopPs(2, SIGKILL);
  ASSERT_TRUE(killed.ok()) << killed.status();
  auto code = (*scaling)->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 1) << (*scaling)->Log();
  EXPECT_THAT((*scaling)->Log(), HasSubstr("back on 2 ps"));

  auto done = c->WaitForState(JobStatus::SUCCEEDED, absl::Minutes(4));
  ASSERT_TRUE(done.ok()) << done.status() << "\n" << c->Logs();
  EXPECT_EQ(done->steps_done(), kSteps);
  EXPECT_EQ(done->ps_size(), 2);
  EXPECT_EQ(done->layout_version(), 1);
  EXPECT_EQ(done->ps_scales_failed(), 1);
  ASSERT_EQ(done->recoveries_size(), 1) << done->ShortDebugString();
  EXPECT_THAT(done->recoveries(0).cause(), HasSubstr("the move onto 3 ps failed"));
  EXPECT_EQ(done->steps_lost(), 0) << "rolled back to the scale's own cut";
  ExpectFinalBitIdentical(c, dir);
}

}  // namespace
}  // namespace testing
}  // namespace shardps
