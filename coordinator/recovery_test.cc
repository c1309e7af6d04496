// Recovery over two in-process ps tasks behind interceptors: ps 1 can be taken down, brought
// back, or restarted as a new incarnation holding nothing.
#include "coordinator/recovery.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "client/ps_client.h"
#include "coordinator/chief_state.h"
#include "coordinator/chief_test_util.h"
#include "coordinator/in_process_ps.h"
#include "coordinator/job_phase.h"
#include "coordinator/job_spec.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/scheduler.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

using Kind = JobPhase::Kind;
constexpr int kSteps = 20;

class RecoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPs::Options options;
    options.first_incarnation = 100;
    options.intercept = true;
    options.client.max_attempts = 1;
    tasks_ = *InProcessPs::Create(options);
    client_ = tasks_->client();

    JobSpec job =
        *ParseJobSpec(R"({"name": "t", "model": "softmax", "partitioner": "fixed:2"})", 2);
    job.set_job_id("t-1");
    VariableDef def;
    def.name = "t/w";
    def.shape = {8, 4};
    def.optimizer.set_type(OptimizerSpec::SGD);
    def.optimizer.set_learning_rate(0.1);
    ASSERT_TRUE(client_->SetGenerationAll(1).ok());
    {
      absl::MutexLock lock(&state_.mu);
      ASSERT_TRUE(StartTrainingLocked(&state_, job, {def}, kSteps).ok());
    }

    PsMonitor::Options m;
    m.interval = absl::Milliseconds(20);
    m.probe_timeout = absl::Seconds(1);
    m.unreachable_after = absl::Milliseconds(100);
    m.max_interval = absl::Milliseconds(80);
    monitor_ = std::make_unique<PsMonitor>(client_, m, [this] {
      absl::MutexLock lock(&state_.mu);
      state_.control_wake = true;
    });
    {
      absl::MutexLock lock(&state_.mu);
      state_.ps_addresses = {"ps0", "ps1"};
    }
    recovery_ = std::make_unique<Recovery>(&state_, monitor_.get(), client_);
    // As the chief starts a job once the monitor has seen every ps up (RefreshPsViews).
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      bool up = true;
      for (const PsMonitor::PsView& v : monitor_->Views()) up &= v.up;
      if (up) break;
      absl::SleepFor(absl::Milliseconds(5));
    }
    absl::MutexLock lock(&recovery_->mu());
    recovery_->StartJobLocked({100, 101});
  }

  void TearDown() override {
    recovery_.reset();
    monitor_.reset();
    tasks_->Shutdown();
  }

  void Down(int k) { tasks_->Down(k); }
  void Up(int k) { tasks_->Up(k); }
  void Restart(int k, uint64_t incarnation) { ASSERT_TRUE(tasks_->Restart(k, incarnation).ok()); }

  // Runs UpdatePsPhaseLocked until `pred` (called holding the chief's mutex) holds, for up
  // to 10 s.
  template <typename Pred>
  bool UpdateUntil(Pred pred) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (absl::Now() < deadline) {
      {
        absl::MutexLock lock(&recovery_->mu());
        recovery_->UpdatePsPhaseLocked();
        if (pred()) return true;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    return false;
  }

  // Completes steps [0, n).
  void Complete(int n) {
    absl::MutexLock lock(&state_.mu);
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(state_.scheduler->Lease(0, absl::InfiniteFuture()).has_value());
      ASSERT_TRUE(state_.scheduler->Complete(i, 0));
    }
  }

  std::unique_ptr<InProcessPs> tasks_;
  PsClient* client_ = nullptr;  // tasks_'s
  ChiefState state_;
  std::unique_ptr<PsMonitor> monitor_;
  std::unique_ptr<Recovery> recovery_;
};

TEST_F(RecoveryTest, AnUnreachablePsHoldsTheJobUntilItAnswersAgain) {
  Down(1);
  ASSERT_TRUE(UpdateUntil([this] {
    state_.mu.AssertHeld();
    return state_.phase.kind() == Kind::kPsUnreachable;
  }));
  {
    absl::MutexLock lock(&state_.mu);
    EXPECT_TRUE(absl::StartsWith(state_.phase.Text(), "paused: ps 1 (ps1) unreachable for "))
        << state_.phase.Text();
    EXPECT_TRUE(absl::StrContains(state_.phase.Text(), "connection refused"))
        << state_.phase.Text();
    EXPECT_FALSE(state_.phase.leasing());
  }
  Up(1);
  ASSERT_TRUE(UpdateUntil([this] {
    state_.mu.AssertHeld();
    return state_.phase.kind() == Kind::kTraining;
  }));
  absl::MutexLock lock(&recovery_->mu());
  EXPECT_FALSE(recovery_->pending());
}

TEST_F(RecoveryTest, ARestartedPsIsRolledBackIntoANewGeneration) {
  Complete(5);
  Restart(1, 0x3e7);
  ASSERT_TRUE(UpdateUntil([this] {
    recovery_->mu().AssertHeld();
    return recovery_->pending();
  }));
  absl::MutexLock lock(&recovery_->mu());
  EXPECT_EQ(recovery_->cause(), "ps 1 (ps1) restarted (incarnation 3e7) and lost its shards");
  {
    std::vector<PsMonitor::PsView> views = monitor_->Views();
    JobStatus status;
    recovery_->AddPsToStatusLocked(views, &status);
    ASSERT_EQ(status.ps_size(), 2);
    EXPECT_EQ(status.ps(0).state(), "up");
    EXPECT_EQ(status.ps(1).state(), "restarted");
  }
  EXPECT_EQ(recovery_->RecoverLocked(), Recovery::Result::kRecovered);
  EXPECT_FALSE(recovery_->pending());
  ChiefState& s = state_;
  s.mu.AssertHeld();
  EXPECT_EQ(s.phase.kind(), Kind::kTraining);
  EXPECT_EQ(s.generation, 2);
  EXPECT_EQ(s.scheduler->done_steps(), 0);
  ASSERT_EQ(s.status.recoveries_size(), 1);
  EXPECT_EQ(s.status.recoveries(0).cause(),
            "ps 1 (ps1) restarted (incarnation 3e7) and lost its shards");
  EXPECT_EQ(s.status.recoveries(0).action(), "re-initialized (no usable checkpoint)");
  EXPECT_EQ(s.status.recoveries(0).steps_lost(), 5);
  EXPECT_EQ(s.status.steps_lost(), 5);
  // The restarted ps holds the job's shards again, at the new generation.
  HealthResponse health;
  tasks_->store(1)->Health(&health);
  EXPECT_GT(health.num_shards(), 0);
  EXPECT_EQ(health.generation(), 2);
}

TEST_F(RecoveryTest, TheFirstLossIsTheCauseAndWakesTheControlThread) {
  absl::MutexLock lock(&recovery_->mu());
  state_.mu.AssertHeld();
  state_.control_wake = false;
  recovery_->PsStateLostLocked(1, "shard t/w/part_1 not found");
  recovery_->PsStateLostLocked(0, "later");
  EXPECT_EQ(recovery_->cause(), "ps 1 lost the job's shards (shard t/w/part_1 not found)");
  EXPECT_TRUE(state_.control_wake);
}

TEST_F(RecoveryTest, AnInterruptedJobIsNotRolledBack) {
  absl::MutexLock lock(&recovery_->mu());
  state_.mu.AssertHeld();
  recovery_->PsStateLostLocked(-1, "gone");
  EXPECT_EQ(recovery_->cause(), "a ps lost the job's shards (gone)");
  ASSERT_TRUE(state_.SetPhaseLocked(Kind::kInterrupted));
  EXPECT_EQ(recovery_->RecoverLocked(), Recovery::Result::kStopped);
  EXPECT_EQ(state_.generation, 1);
  EXPECT_EQ(state_.phase.kind(), Kind::kInterrupted);
}

}  // namespace
}  // namespace shardps
