#include "coordinator/checkpointing.h"

#include <atomic>
#include <memory>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_dir.h"
#include "client/ps_client.h"
#include "common/test_files.h"
#include "coordinator/chief_state.h"
#include "coordinator/chief_test_util.h"
#include "coordinator/in_process_ps.h"
#include "coordinator/job_phase.h"
#include "coordinator/job_spec.h"
#include "coordinator/job_store.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/recovery.h"
#include "coordinator/rollback.h"
#include "coordinator/scheduler.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

// A variable of 10 rows x 4 split 6 + 4 over two ps, with Adam.
CheckpointContents Contents() {
  CheckpointContents c;
  c.checkpoint_id = 5;
  c.job_id = "j-1";
  c.job = *ParseJobSpec(R"({"name": "j", "model": "softmax", "partitioner": "fixed:2"})", 1);
  c.generation = 3;
  c.steps_done = 1003;
  c.total_steps = 5000;
  c.steps_per_epoch = 469;
  VariableLayout v;
  v.name = "j/w";
  v.shape = {10, 4};
  v.rows = 10;
  v.row_width = 4;
  v.num_elements = 40;
  c.snapshots.resize(2);
  c.files.resize(2);
  for (int k = 0; k < 2; ++k) {
    VariableLayout::Shard s;
    s.spec.set_name(absl::StrCat("j/w/part_", k));
    s.spec.set_variable("j/w");
    s.spec.set_part(k);
    s.spec.set_num_parts(2);
    s.spec.mutable_optimizer()->set_type(OptimizerSpec::ADAM);
    s.spec.mutable_optimizer()->set_learning_rate(0.001);
    s.ps = k;
    s.row_offset = k == 0 ? 0 : 6;
    s.rows = k == 0 ? 6 : 4;
    v.shards.push_back(s);
    ShardInfo* info = c.snapshots[k].add_shards();
    *info->mutable_spec() = s.spec;
    info->set_version(1003 + k);
    c.files[k].set_file(absl::StrCat("ps-0000", k, "-of-00002.safetensors"));
    for (const char* suffix : {"", "/adam_m", "/adam_v"}) {
      c.files[k].add_tensors()->set_name(absl::StrCat(s.spec.name(), suffix));
    }
  }
  c.variables.push_back(v);
  return c;
}

TEST(BuildManifestTest, RecordsEveryShardWithItsVersionFileAndSlots) {
  absl::StatusOr<Manifest> m = BuildManifest(Contents(), 1.5e9);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->checkpoint_id, 5);
  EXPECT_EQ(m->job_id, "j-1");
  EXPECT_EQ(m->generation, 3);
  EXPECT_EQ(m->progress.steps_done, 1003);
  EXPECT_EQ(m->progress.epoch, 2);
  EXPECT_EQ(m->progress.batch_index, 1003 - 2 * 469);
  ASSERT_EQ(m->variables.size(), 1u);
  const ManifestVariable& v = m->variables[0];
  EXPECT_EQ(v.partitioner, "fixed:2");
  EXPECT_EQ(v.slots, (std::vector<std::string>{"adam_m", "adam_v"}));
  ASSERT_EQ(v.shards.size(), 2u);
  EXPECT_EQ(v.shards[1].row_offset, 6);
  EXPECT_EQ(v.shards[1].rows, 4);
  EXPECT_EQ(v.shards[1].version, 1004);
  EXPECT_EQ(v.shards[1].file, "ps-00001-of-00002.safetensors");
  EXPECT_EQ(v.shards[1].tensors.at(""), "j/w/part_1");
  EXPECT_EQ(v.shards[1].tensors.at("adam_v"), "j/w/part_1/adam_v");
  // The job is embedded as its job file.
  EXPECT_TRUE(ParseJobSpec(m->job_json, 1).ok()) << m->job_json;
}

TEST(BuildManifestTest, RefusesAShardMissingFromItsPsSnapshot) {
  CheckpointContents c = Contents();
  c.snapshots[1].clear_shards();
  absl::StatusOr<Manifest> m = BuildManifest(c, 0);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("j/w/part_1"), std::string::npos) << m.status();
}

TEST(BuildManifestTest, RefusesASlotTensorMissingFromTheFile) {
  CheckpointContents c = Contents();
  c.files[0].mutable_tensors()->RemoveLast();
  absl::StatusOr<Manifest> m = BuildManifest(c, 0);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(m.status().message().find("j/w/part_0/adam_v"), std::string::npos) << m.status();
}

// The driver over two in-process ps tasks, with a real checkpoint directory: a job of
// kSteps steps that the test completes by hand.
class CheckpointDriverTest : public ::testing::Test {
 protected:
  static constexpr int kSteps = 20;
  using Kind = JobPhase::Kind;

  void SetUp() override {
    tasks_ = *InProcessPs::Create(InProcessPs::Options());
    client_ = tasks_->client();
    monitor_ = std::make_unique<PsMonitor>(client_, PsMonitor::Options(), [] {});
    {
      absl::MutexLock lock(&state_.mu);
      state_.ps_addresses = {"ps0", "ps1"};
    }
    recovery_ = std::make_unique<Recovery>(&state_, monitor_.get(), client_);
    driver_ = std::make_unique<CheckpointDriver>(&state_, recovery_.get(), client_);
    dir_ = FreshTestDir("checkpoint_driver");

    JobSpec job = *ParseJobSpec(
        absl::StrCat(R"({"name": "j", "model": "softmax", "partitioner": "fixed:2",)",
                     R"( "checkpoint": {"dir": ")", dir_, R"(", "every_steps": 5, "keep": 2}})"),
        1);
    job.set_job_id("j-1");
    VariableDef def;
    def.name = "j/w";
    def.shape = {10, 4};
    def.optimizer.set_type(OptimizerSpec::ADAM);
    def.optimizer.set_learning_rate(0.001);
    ASSERT_TRUE(CreateJobVariables(*client_, job, {def}).ok());
    ASSERT_TRUE(client_->SetGenerationAll(1).ok());
    absl::MutexLock lock(&state_.mu);
    ASSERT_TRUE(StartTrainingLocked(&state_, job, {def}, kSteps).ok());
    state_.store = *JobStore::Open(dir_);
    driver_->mu().AssertHeld();
    driver_->StartJobLocked();
  }

  void TearDown() override {
    driver_.reset();
    recovery_.reset();
    monitor_.reset();
    tasks_->Shutdown();
  }

  // Completes the next n steps.
  void Complete(int n) {
    absl::MutexLock lock(&state_.mu);
    for (int i = 0; i < n; ++i) {
      std::optional<StepTask> task = state_.scheduler->Lease(0, absl::InfiniteFuture());
      ASSERT_TRUE(task.has_value());
      ASSERT_TRUE(state_.scheduler->Complete(task->step_id, 0));
    }
  }

  // A push of step `step` to j/w on a thread of its own; `pushed` is set once it is answered.
  std::thread PushInBackground(int64_t step, std::atomic<bool>* pushed) {
    return std::thread([this, step, pushed] {
      PushOptions options;
      options.step = step;
      EXPECT_TRUE(client_->Push("j/w", std::vector<float>(40, 1.0f), options).ok());
      *pushed = true;
    });
  }

  // Once the cut has begun (its barrier set: no lease before the ps hold), the next lease.
  std::optional<StepTask> LeaseDuringTheCut() {
    for (int tries = 0; tries < 2000; ++tries) {
      absl::SleepFor(absl::Milliseconds(2));
      absl::MutexLock lock(&state_.mu);
      if (state_.phase.kind() != Kind::kCheckpointCut) continue;
      std::optional<StepTask> next = state_.scheduler->Lease(0, absl::InfiniteFuture());
      if (next.has_value()) return next;
    }
    return std::nullopt;
  }

  std::string Due() {
    absl::MutexLock lock(&driver_->mu());
    const char* why = driver_->DueLocked();
    return why == nullptr ? "" : why;
  }

  void Run(const std::string& why) {
    absl::MutexLock lock(&driver_->mu());
    driver_->RunLocked(why);
  }

  std::vector<CommittedCheckpoint> Committed() {
    return *CheckpointDir::Open(dir_, /*create=*/false)->List();
  }

  std::unique_ptr<InProcessPs> tasks_;
  PsClient* client_ = nullptr;  // tasks_'s
  ChiefState state_;
  std::unique_ptr<PsMonitor> monitor_;
  std::unique_ptr<Recovery> recovery_;
  std::unique_ptr<CheckpointDriver> driver_;
  std::string dir_;
};

TEST_F(CheckpointDriverTest, EveryStepsIsDueOnceThatManyStepsAreDone) {
  EXPECT_EQ(Due(), "");
  Complete(4);
  EXPECT_EQ(Due(), "");
  Complete(1);
  EXPECT_EQ(Due(), "every_steps");
  Run("every_steps");
  EXPECT_EQ(Due(), "");
  std::vector<CommittedCheckpoint> committed = Committed();
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].manifest.progress.steps_done, 5);
  EXPECT_FALSE(committed[0].manifest.final);
  absl::MutexLock lock(&state_.mu);
  EXPECT_TRUE(state_.status.has_checkpoint());
  EXPECT_EQ(state_.status.last_checkpoint().steps_done(), 5);
  EXPECT_EQ(state_.phase.kind(), Kind::kTraining);
  EXPECT_TRUE(state_.scheduler->Lease(0, absl::InfiniteFuture()).has_value())
      << "the barrier was lifted";
}

TEST_F(CheckpointDriverTest, AnInterruptIsTakenFirstAndEveryRequestIsAnswered) {
  std::vector<std::string> answered;
  {
    absl::MutexLock lock(&driver_->mu());
    driver_->RequestLocked([&answered](absl::StatusOr<CheckpointInfo> info) {
      answered.push_back(absl::StrCat("on demand ", info.ok() ? info->id() : -1));
    });
    driver_->RequestInterruptLocked([&answered](absl::StatusOr<CheckpointInfo> info) {
      answered.push_back(absl::StrCat("interrupt ", info.ok() ? info->id() : -1));
    });
  }
  EXPECT_EQ(Due(), "interrupted");
  Run("interrupted");
  EXPECT_EQ(answered, (std::vector<std::string>{"on demand 1", "interrupt 1"}));
  EXPECT_EQ(Due(), "");
}

TEST_F(CheckpointDriverTest, RequestsOfAJobThatStoppedFail) {
  absl::Status failed;
  {
    absl::MutexLock lock(&driver_->mu());
    driver_->RequestLocked([&failed](absl::StatusOr<CheckpointInfo> info) {
      failed = info.status();
    });
    driver_->FailRequestsLocked();
  }
  EXPECT_EQ(failed.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(failed.message(), "job \"j-1\" is not running");
  EXPECT_EQ(Due(), "");
}

TEST_F(CheckpointDriverTest, TheFinalCheckpointEndsTraining) {
  Complete(kSteps);
  EXPECT_EQ(Due(), "final");
  Run("final");
  EXPECT_EQ(Due(), "");
  std::vector<CommittedCheckpoint> committed = Committed();
  ASSERT_FALSE(committed.empty());
  EXPECT_TRUE(committed[0].manifest.final);
  EXPECT_EQ(committed[0].manifest.progress.steps_done, kSteps);
  absl::MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.phase.kind(), Kind::kTrainingDone);
  EXPECT_TRUE(state_.store_state.finished);
  EXPECT_EQ(state_.store_state.final_checkpoint, committed[0].id);
  EXPECT_TRUE(state_.store->ReadState()->finished);
}

// Once every step is leased, a periodic checkpoint would be cut at the last step, as the
// final one is: it is taken as the final one, so the job's end writes one checkpoint, not two.
TEST_F(CheckpointDriverTest, APeriodicCheckpointDueOnceEveryStepIsLeasedIsTheFinalOne) {
  Complete(kSteps - 2);
  EXPECT_EQ(Due(), "every_steps");
  std::vector<int64_t> leased;
  {
    absl::MutexLock lock(&state_.mu);
    for (int i = 0; i < 2; ++i) {
      std::optional<StepTask> task = state_.scheduler->Lease(0, absl::InfiniteFuture());
      ASSERT_TRUE(task.has_value());
      leased.push_back(task->step_id);
    }
  }
  EXPECT_EQ(Due(), "final");
  {
    absl::MutexLock lock(&state_.mu);
    for (int64_t id : leased) ASSERT_TRUE(state_.scheduler->Complete(id, 0));
  }
  Run("final");
  EXPECT_EQ(Due(), "");
  std::vector<CommittedCheckpoint> committed = Committed();
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_TRUE(committed[0].manifest.final);
  EXPECT_EQ(committed[0].manifest.progress.steps_done, kSteps);
}

// Ps 1 is behind the job's generation (it restarted and missed the move, as a ps killed
// while it writes the final checkpoint and started again is): its snapshot fails with
// PS_STATE_LOST, so the job rolls back instead of ending without its final checkpoint.
TEST_F(CheckpointDriverTest, AFinalCheckpointOnAPsBehindTheJobsGenerationRollsTheJobBack) {
  SetGenerationRequest raise;
  raise.set_generation(2);
  SetGenerationResponse raised;
  ASSERT_TRUE(tasks_->store(0)->SetGeneration(raise, &raised).ok());
  {
    absl::MutexLock lock(&state_.mu);
    state_.generation = 2;
  }
  Complete(kSteps);
  EXPECT_EQ(Due(), "final");
  Run("final");
  EXPECT_TRUE(Committed().empty());
  absl::MutexLock lock(&state_.mu);
  EXPECT_NE(state_.phase.kind(), Kind::kTrainingDone);
  EXPECT_FALSE(state_.store_state.finished);
  recovery_->mu().AssertHeld();
  ASSERT_TRUE(recovery_->pending());
  EXPECT_TRUE(absl::StartsWith(recovery_->cause(), "ps 1 lost the job's shards (during the final "
                                                   "checkpoint: "))
      << recovery_->cause();
}

// The version of every shard of j/w in the newest committed checkpoint.
std::vector<int64_t> CheckpointedVersions(const std::vector<CommittedCheckpoint>& committed) {
  std::vector<int64_t> versions;
  for (const ManifestVariable& v : committed.back().manifest.variables) {
    for (const ManifestShard& shard : v.shards) versions.push_back(shard.version);
  }
  return versions;
}

// A cut holds the pushes of steps at or above its barrier instead of draining: the step
// after the barrier is leased while the one below it is still out, its push waits, the
// checkpoint holds exactly the steps below the barrier, and the held push is applied after
// the snapshot.
TEST_F(CheckpointDriverTest, ACutHoldsLaterStepsPushesAndKeepsLeasing) {
  {
    absl::MutexLock lock(&state_.mu);
    ASSERT_EQ(state_.scheduler->Lease(0, absl::InfiniteFuture())->step_id, 0);
  }
  std::thread cut([this] { Run("on demand"); });
  // Step 1 is leased during the cut (the old drain leased nothing past the barrier).
  std::optional<StepTask> next = LeaseDuringTheCut();
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->step_id, 1);
  std::atomic<bool> pushed{false};
  std::thread push = PushInBackground(1, &pushed);
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(pushed) << "step 1's push was applied before the cut";
  // Step 0 completes (its push, not held, reaches the ps at once): the cut comes.
  PushOptions step0;
  step0.step = 0;
  ASSERT_TRUE(client_->Push("j/w", std::vector<float>(40, 1.0f), step0).ok());
  {
    absl::MutexLock lock(&state_.mu);
    ASSERT_TRUE(state_.scheduler->Complete(0, 0));
  }
  cut.join();
  push.join();
  EXPECT_TRUE(pushed);
  const std::vector<CommittedCheckpoint> committed = Committed();
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].manifest.progress.steps_done, 1);
  // Each shard holds step 0's update and not step 1's, which it applied after.
  EXPECT_EQ(CheckpointedVersions(committed), (std::vector<int64_t>{1, 1}));
  std::vector<float> out(40);
  PullVersions versions;
  ASSERT_TRUE(client_->Pull("j/w", absl::MakeSpan(out), {}, &versions).ok());
  EXPECT_EQ(versions.min_version, 2);
  absl::MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.phase.kind(), Kind::kTraining);
  EXPECT_TRUE(state_.status.checkpoint_error().empty()) << state_.status.checkpoint_error();
}

// A held cut without progress below its barrier (here: step 0 never completes while step 1
// is held) lets go after the patience and drains to a new barrier past every leased step.
TEST_F(CheckpointDriverTest, AHeldCutWithoutProgressDrainsInstead) {
  {
    absl::MutexLock lock(&state_.mu);
    ASSERT_EQ(state_.scheduler->Lease(0, absl::InfiniteFuture())->step_id, 0);
  }
  std::thread cut([this] { Run("on demand"); });
  std::optional<StepTask> next = LeaseDuringTheCut();
  ASSERT_TRUE(next.has_value());
  std::atomic<bool> pushed{false};
  std::thread push = PushInBackground(1, &pushed);
  // After the patience (2 s) the ps let step 1's push through, and the new barrier (2)
  // leases nothing more.
  for (int tries = 0; tries < 100 && !pushed; ++tries) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_TRUE(pushed);
  {
    absl::MutexLock lock(&state_.mu);
    EXPECT_FALSE(state_.scheduler->Lease(0, absl::InfiniteFuture()).has_value());
    ASSERT_TRUE(state_.scheduler->Complete(1, 0));
    ASSERT_TRUE(state_.scheduler->Complete(0, 0));
  }
  cut.join();
  push.join();
  const std::vector<CommittedCheckpoint> committed = Committed();
  ASSERT_EQ(committed.size(), 1u);
  EXPECT_EQ(committed[0].manifest.progress.steps_done, 2);
  EXPECT_EQ(CheckpointedVersions(committed), (std::vector<int64_t>{1, 1}));
}

// A cut that cannot come (a step below the barrier is still out) is abandoned when a
// rollback becomes due; leasing resumes.
TEST_F(CheckpointDriverTest, ACutIsAbandonedWhenARollbackIsDue) {
  {
    absl::MutexLock lock(&state_.mu);
    ASSERT_TRUE(state_.scheduler->Lease(0, absl::InfiniteFuture()).has_value());
  }
  std::thread lose([this] {
    absl::SleepFor(absl::Milliseconds(100));
    absl::MutexLock lock(&recovery_->mu());
    recovery_->PsStateLostLocked(1, "gone");
  });
  Run("on demand");
  lose.join();
  EXPECT_TRUE(Committed().empty());
  absl::MutexLock lock(&state_.mu);
  EXPECT_EQ(state_.status.checkpoint_error(),
            "checkpoint (on demand) failed: abandoned before the cut at step 1: "
            "ps 1 lost the job's shards (gone)")
      << state_.status.checkpoint_error();
  EXPECT_EQ(state_.phase.kind(), Kind::kTraining);
}

}  // namespace
}  // namespace shardps
