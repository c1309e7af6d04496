// Preparing jobs against an in-process ps task, on the real Fashion-MNIST (Debian's
// dataset-fashion-mnist: the chief sizes epochs from its files' headers).
#include "coordinator/job_preparation.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
#include "common/test_files.h"
#include "coordinator/in_process_ps.h"
#include "coordinator/job_spec.h"
#include "coordinator/job_store.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

class JobPreparationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPs::Options options;
    options.num_tasks = 1;
    tasks_ = *InProcessPs::Create(options);
    ps_ = tasks_->client();
    options_.ps = ps_;
  }
  void TearDown() override { tasks_->Shutdown(); }

  static JobSpec Job(const std::string& extra) {
    absl::StatusOr<JobSpec> job = ParseJobSpec(
        absl::StrCat(R"({"name": "t", "model": "softmax", "batch_size": 64, "backend": "cpu")",
                     extra, "}"),
        1);
    EXPECT_TRUE(job.ok()) << job.status();
    return *job;
  }

  int64_t PsGeneration() {
    HealthResponse health;
    tasks_->store(0)->Health(&health);
    return health.generation();
  }

  std::unique_ptr<InProcessPs> tasks_;
  PsClient* ps_ = nullptr;  // tasks_'s
  PrepareOptions options_;
};

TEST_F(JobPreparationTest, AFreshJobIsSizedFromItsDataAndItsVariablesCreated) {
  absl::StatusOr<PreparedJob> p =
      PrepareJob(Job(R"(, "epochs": 2)"), SubmitJobRequest::AUTO, options_);
  ASSERT_TRUE(p.ok()) << p.status();
  // 60,000 training images in batches of 64.
  EXPECT_EQ(p->steps_per_epoch, 938);
  ASSERT_NE(p->scheduler, nullptr);
  EXPECT_EQ(p->scheduler->total_steps(), 2 * 938);
  EXPECT_EQ(p->scheduler->done_steps(), 0);
  EXPECT_TRUE(absl::StartsWith(p->job.job_id(), "t-")) << p->job.job_id();
  EXPECT_EQ(p->response.job_id(), p->job.job_id());
  EXPECT_EQ(p->response.total_steps(), 2 * 938);
  EXPECT_EQ(p->response.resumed_from(), "");
  EXPECT_FALSE(p->response.already_finished());
  EXPECT_EQ(p->store, nullptr);
  EXPECT_EQ(p->generation, 1);
  EXPECT_EQ(PsGeneration(), 1);
  ASSERT_EQ(p->incarnations.size(), 1u);
  EXPECT_NE(p->incarnations[0], 0u);
  for (const VariableDef& def : p->defs) {
    EXPECT_TRUE(ps_->GetLayout(def.name).ok()) << def.name;
  }
}

TEST_F(JobPreparationTest, JobVariablesAreNamedForTheJobWithItsOptimizerAndMode) {
  absl::StatusOr<PreparedJob> p = PrepareJob(
      Job(R"(, "steps": 4, "mode": "sync", "num_replicas": 1, "optimizer": "sgd")"),
      SubmitJobRequest::AUTO, options_);
  ASSERT_TRUE(p.ok()) << p.status();
  ASSERT_EQ(p->defs.size(), 2u);  // softmax: kernel and bias
  for (const VariableDef& def : p->defs) {
    EXPECT_TRUE(absl::StartsWith(def.name, "t/")) << def.name;
    EXPECT_EQ(def.optimizer.type(), OptimizerSpec::SGD) << def.name;
    EXPECT_EQ(def.update.mode(), UpdateSpec::SYNC) << def.name;
    EXPECT_EQ(def.update.num_replicas(), 1) << def.name;
  }
  EXPECT_EQ(p->defs[0].shape, (std::vector<int64_t>{784, 10}));
}

TEST_F(JobPreparationTest, MissingDataNamesDataDir) {
  absl::StatusOr<PreparedJob> p = PrepareJob(Job(R"(, "data_dir": "/nonexistent/fm")"),
                                             SubmitJobRequest::AUTO, options_);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "\"data_dir\"")) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "/nonexistent/fm")) << p.status();
}

TEST_F(JobPreparationTest, ResumeWithoutACheckpointDirectoryIsRefused) {
  absl::StatusOr<PreparedJob> p = PrepareJob(Job(""), SubmitJobRequest::RESUME, options_);
  ASSERT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition) << p.status();
  EXPECT_TRUE(absl::StrContains(p.status().message(), "nothing to resume")) << p.status();
}

// The same job submitted again (a restarted chief) finds every ps still at its generation:
// it resumes from their live state and its journal, under its first id.
TEST_F(JobPreparationTest, AKnownJobWhosePsKeptTheirStateResumesLive) {
  const std::string dir = FreshTestDir("prepare_live");
  const std::string extra = absl::StrCat(R"(, "steps": 10, "checkpoint": ")", dir, "\"");
  absl::StatusOr<PreparedJob> first = PrepareJob(Job(extra), SubmitJobRequest::AUTO, options_);
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_NE(first->store, nullptr);
  ASSERT_TRUE(first->store->Journal(0).ok());
  ASSERT_TRUE(first->store->Journal(1).ok());
  const std::string job_id = first->job.job_id();
  first->store.reset();

  absl::StatusOr<PreparedJob> again = PrepareJob(Job(extra), SubmitJobRequest::AUTO, options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->job.job_id(), job_id);
  EXPECT_EQ(again->generation, first->generation);
  EXPECT_EQ(again->response.resumed_from(),
            "the ps tasks' live state (generation 1, 2 steps journalled since step 0)");
  EXPECT_EQ(again->scheduler->done_steps(), 2);
  EXPECT_EQ(again->response.resumed_at_step(), 2);
}

TEST_F(JobPreparationTest, AJobTheDirectorySaysFinishedIsNotTrainedAgain) {
  const std::string dir = FreshTestDir("prepare_finished");
  const std::string extra = absl::StrCat(R"(, "steps": 10, "checkpoint": ")", dir, "\"");
  absl::StatusOr<PreparedJob> first = PrepareJob(Job(extra), SubmitJobRequest::AUTO, options_);
  ASSERT_TRUE(first.ok()) << first.status();
  JobStore::State state = first->state;
  state.finished = true;
  state.final_checkpoint = 7;
  ASSERT_TRUE(first->store->WriteState(state).ok());
  first->store.reset();

  absl::StatusOr<PreparedJob> again = PrepareJob(Job(extra), SubmitJobRequest::AUTO, options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->response.already_finished());
  EXPECT_EQ(again->response.resumed_from(), "finished before (checkpoint 7)");
  EXPECT_EQ(again->response.total_steps(), 10);
  EXPECT_EQ(again->scheduler, nullptr);
}

TEST_F(JobPreparationTest, FreshStartsOverInANewGeneration) {
  const std::string dir = FreshTestDir("prepare_fresh");
  const std::string extra = absl::StrCat(R"(, "steps": 10, "checkpoint": ")", dir, "\"");
  absl::StatusOr<PreparedJob> first = PrepareJob(Job(extra), SubmitJobRequest::AUTO, options_);
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string job_id = first->job.job_id();
  first->store.reset();
  absl::StatusOr<PreparedJob> fresh = PrepareJob(Job(extra), SubmitJobRequest::FRESH, options_);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_NE(fresh->job.job_id(), job_id);
  EXPECT_EQ(fresh->response.resumed_from(), "");
  EXPECT_EQ(fresh->generation, 2);
  EXPECT_EQ(PsGeneration(), 2);
}

HealthResponse Budget(int64_t budget, int64_t available) {
  HealthResponse h;
  h.set_memory_budget_bytes(budget);
  h.set_memory_available_bytes(available);
  return h;
}

TEST(CheckModelFitsTest, CountsParametersAndOptimizerSlotsAgainstWhatThePsHold) {
  VariableDef def;
  def.name = "t/w";
  def.shape = {100, 10};
  def.optimizer.set_type(OptimizerSpec::ADAM);  // two slots: 3 x 4,000 bytes
  EXPECT_TRUE(CheckModelFits({def}, {Budget(1 << 20, 6000), Budget(1 << 20, 6000)}).ok());
  const absl::Status s = CheckModelFits({def}, {Budget(1 << 20, 5000), Budget(1 << 20, 6000)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "needs 12000 bytes")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "can hold 11000 more")) << s;
  // A ps without a budget holds anything.
  EXPECT_TRUE(CheckModelFits({def}, {Budget(0, 0), Budget(1 << 20, 10)}).ok());
}

}  // namespace
}  // namespace shardps
