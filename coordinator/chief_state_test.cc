#include "coordinator/chief_state.h"

#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/test_files.h"
#include "coordinator/job_phase.h"
#include "coordinator/job_store.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using Kind = JobPhase::Kind;

// A state whose job runs (phase kTraining, status RUNNING), with no wake-up pending.
void Running(ChiefState& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) {
  ASSERT_TRUE(s.SetPhaseLocked(Kind::kStarting));
  ASSERT_TRUE(s.SetPhaseLocked(Kind::kTraining));
  s.status.set_state(JobStatus::RUNNING);
  s.status.set_job_id("j-1");
  s.dispatch_wake = s.control_wake = false;
}

TEST(ChiefStateTest, APhaseChangeWakesBothThreads) {
  ChiefState s;
  absl::MutexLock lock(&s.mu);
  Running(s);
  ASSERT_TRUE(s.SetPhaseLocked(Kind::kPsUnreachable, "ps 1 unreachable for 1 s"));
  EXPECT_TRUE(s.dispatch_wake);
  EXPECT_TRUE(s.control_wake);
  s.dispatch_wake = s.control_wake = false;
  // A new detail alone is no change to act on.
  ASSERT_TRUE(s.SetPhaseLocked(Kind::kPsUnreachable, "ps 1 unreachable for 2 s"));
  EXPECT_FALSE(s.dispatch_wake);
  EXPECT_FALSE(s.control_wake);
  ASSERT_TRUE(s.ReleasePhaseLocked(Kind::kPsUnreachable));
  EXPECT_EQ(s.phase.kind(), Kind::kTraining);
  EXPECT_TRUE(s.dispatch_wake);
  EXPECT_TRUE(s.control_wake);
}

TEST(ChiefStateTest, ARefusedMoveChangesNothingAndWakesNoOne) {
  ChiefState s;
  absl::MutexLock lock(&s.mu);
  Running(s);
  EXPECT_FALSE(s.SetPhaseLocked(Kind::kEnded));
  EXPECT_FALSE(s.ReleasePhaseLocked(Kind::kRecovering));
  EXPECT_EQ(s.phase.kind(), Kind::kTraining);
  EXPECT_FALSE(s.dispatch_wake);
  EXPECT_FALSE(s.control_wake);
}

TEST(ChiefStateTest, EndingAJobSetsItsStateAndLetsItsCallsDrain) {
  ChiefState s;
  absl::MutexLock lock(&s.mu);
  Running(s);
  s.EndJobLocked(JobStatus::FAILED, "step 3 failed 4 times");
  EXPECT_EQ(s.status.state(), JobStatus::FAILED);
  EXPECT_EQ(s.status.error(), "step 3 failed 4 times");
  EXPECT_EQ(s.phase.kind(), Kind::kEnding);
  EXPECT_TRUE(s.dispatch_wake);
  EXPECT_TRUE(s.control_wake);

  ChiefState t;
  absl::MutexLock other(&t.mu);
  Running(t);
  t.EndJobLocked(JobStatus::SUCCEEDED, "");
  EXPECT_EQ(t.status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(t.status.error(), "");
}

TEST(ChiefStateTest, CheckJobNamesTheCurrentJob) {
  ChiefState s;
  absl::MutexLock lock(&s.mu);
  EXPECT_EQ(s.CheckJobLocked("").code(), absl::StatusCode::kFailedPrecondition);
  Running(s);
  EXPECT_TRUE(s.CheckJobLocked("").ok());
  EXPECT_TRUE(s.CheckJobLocked("j-1").ok());
  const absl::Status other = s.CheckJobLocked("j-2");
  EXPECT_EQ(other.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(other.message().find("\"j-2\" is not the current job \"j-1\""), std::string::npos)
      << other;
}

TEST(ChiefStateTest, AStateThatCannotBeWrittenIsReportedAsTheCheckpointError) {
  const std::string dir = FreshTestDir("chief_state_write");
  ChiefState s;
  absl::MutexLock lock(&s.mu);
  Running(s);
  s.store = *JobStore::Open(dir);
  s.store_state.total_steps = 7;
  s.WriteStateLocked();
  EXPECT_EQ(s.status.checkpoint_error(), "");
  EXPECT_EQ(s.store->ReadState()->total_steps, 7);

  ASSERT_EQ(std::system(absl::StrCat("rm -rf '", dir, "'").c_str()), 0);
  s.WriteStateLocked();
  EXPECT_NE(s.status.checkpoint_error().find("writing the job state: "), std::string::npos)
      << s.status.checkpoint_error();
}

}  // namespace
}  // namespace shardps
