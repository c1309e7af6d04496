#include "coordinator/rollback.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "checkpoint/checkpoint_dir.h"
#include "client/ps_client.h"
#include "common/test_files.h"
#include "coordinator/checkpointing.h"
#include "coordinator/in_process_ps.h"
#include "coordinator/job_spec.h"
#include "coordinator/job_store.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

constexpr int kRows = 10;
constexpr int kDim = 4;

// Two in-process ps tasks.
class RollbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tasks_ = *InProcessPs::Create(InProcessPs::Options());
    ps_ = tasks_->client();
    job_ = *ParseJobSpec(R"({"name": "j", "model": "softmax", "partitioner": "fixed:2"})", 1);
    job_.set_job_id("j-1");
    VariableDef def;
    def.name = "j/w";
    def.shape = {kRows, kDim};
    def.initializer.set_type(InitializerSpec::CONSTANT);
    def.initializer.set_value(0.5);
    def.optimizer.set_type(OptimizerSpec::SGD);
    def.optimizer.set_learning_rate(0.1);
    defs_ = {def};
  }

  void TearDown() override {
    tasks_->Shutdown();
  }

  std::vector<float> Values() {
    std::vector<float> out(kRows * kDim);
    const absl::Status s = ps_->Pull("j/w", absl::MakeSpan(out));
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }

  void Assign(float value) {
    const std::vector<float> values(kRows * kDim, value);
    const absl::Status s = ps_->Assign("j/w", values);
    ASSERT_TRUE(s.ok()) << s;
  }

  // Commits a checkpoint of the ps as they are, of job `job_id`, at `steps_done`.
  int64_t Checkpoint(const JobStore& store, const std::string& job_id, int64_t steps_done) {
    absl::StatusOr<CheckpointCut> cut = SnapshotEveryPs(*ps_, store.dir(), 1, 0);
    EXPECT_TRUE(cut.ok()) << cut.status();
    if (!cut.ok()) return 0;
    CheckpointContents contents;
    contents.job_id = job_id;
    contents.job = job_;
    contents.generation = 1;
    contents.steps_done = steps_done;
    contents.total_steps = 100;
    absl::StatusOr<CheckpointInfo> info =
        CommitCheckpoint(*ps_, store.dir(), *cut, contents, {"j/w"}, CommitOptions());
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->id() : 0;
  }

  int64_t Generation(int k) {
    HealthResponse health;
    tasks_->store(k)->Health(&health);
    return health.generation();
  }

  std::unique_ptr<InProcessPs> tasks_;
  PsClient* ps_ = nullptr;  // tasks_'s
  JobSpec job_;
  std::vector<VariableDef> defs_;
};

TEST_F(RollbackTest, CreatesTheJobsVariablesInItsLayoutAndAgainIsNoChange) {
  ASSERT_TRUE(CreateJobVariables(*ps_, job_, defs_).ok());
  Assign(2);
  ASSERT_TRUE(CreateJobVariables(*ps_, job_, defs_).ok());
  absl::StatusOr<VariableLayout> layout = ps_->GetLayout("j/w");
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->shards.size(), 2u);
  EXPECT_EQ(Values(), std::vector<float>(kRows * kDim, 2));
}

TEST_F(RollbackTest, WithoutACheckpointTheShardsStartOverInTheNewGeneration) {
  ASSERT_TRUE(CreateJobVariables(*ps_, job_, defs_).ok());
  ASSERT_TRUE(ps_->SetGenerationAll(1).ok());
  Assign(2);
  absl::StatusOr<RollbackOutcome> rolled = RollBack(*ps_, job_, defs_, nullptr, 2);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->checkpoint_id, 0);
  EXPECT_EQ(rolled->steps_done, 0);
  EXPECT_TRUE(rolled->skipped.empty());
  EXPECT_EQ(Values(), std::vector<float>(kRows * kDim, 0.5));
  EXPECT_EQ(Generation(0), 2);
  EXPECT_EQ(Generation(1), 2);
}

TEST_F(RollbackTest, RestoresTheNewestCheckpointOfTheJob) {
  std::unique_ptr<JobStore> store = *JobStore::Open(FreshTestDir("rollback_newest"));
  ASSERT_TRUE(CreateJobVariables(*ps_, job_, defs_).ok());
  ASSERT_TRUE(ps_->SetGenerationAll(1).ok());
  Assign(2);
  Checkpoint(*store, "j-1", 10);
  Assign(3);
  const int64_t newest = Checkpoint(*store, "j-1", 20);
  Assign(4);
  absl::StatusOr<RollbackOutcome> rolled = RollBack(*ps_, job_, defs_, store.get(), 2);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->checkpoint_id, newest);
  EXPECT_EQ(rolled->steps_done, 20);
  EXPECT_EQ(Values(), std::vector<float>(kRows * kDim, 3));
  EXPECT_EQ(Generation(1), 2);
}

TEST_F(RollbackTest, ACheckpointOfAnotherJobIsSkippedAndNamed) {
  std::unique_ptr<JobStore> store = *JobStore::Open(FreshTestDir("rollback_other"));
  ASSERT_TRUE(CreateJobVariables(*ps_, job_, defs_).ok());
  ASSERT_TRUE(ps_->SetGenerationAll(1).ok());
  Assign(2);
  const int64_t other = Checkpoint(*store, "other-1", 10);
  absl::StatusOr<RollbackOutcome> rolled = RollBack(*ps_, job_, defs_, store.get(), 2);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->checkpoint_id, 0);
  ASSERT_EQ(rolled->skipped.size(), 1u);
  EXPECT_EQ(rolled->skipped[0], absl::StrCat("checkpoint ", other, " belongs to job other-1"));
  EXPECT_EQ(Values(), std::vector<float>(kRows * kDim, 0.5));
}

// A restarted ps holds nothing: the rollback creates its shards before restoring them.
TEST_F(RollbackTest, ShardsMissingOnAPsAreCreatedFirst) {
  std::unique_ptr<JobStore> store = *JobStore::Open(FreshTestDir("rollback_missing"));
  ASSERT_TRUE(CreateJobVariables(*ps_, job_, defs_).ok());
  ASSERT_TRUE(ps_->SetGenerationAll(1).ok());
  Assign(2);
  Checkpoint(*store, "j-1", 10);
  DropShardsRequest drop;
  drop.add_variables("j/w");
  ASSERT_TRUE(ps_->DropShardsAll(drop).ok());
  absl::StatusOr<RollbackOutcome> rolled = RollBack(*ps_, job_, defs_, store.get(), 2);
  ASSERT_TRUE(rolled.ok()) << rolled.status();
  EXPECT_EQ(rolled->steps_done, 10);
  EXPECT_EQ(Values(), std::vector<float>(kRows * kDim, 2));
}

}  // namespace
}  // namespace shardps
