#include "coordinator/chief_test_util.h"

#include "absl/synchronization/mutex.h"
#include "coordinator/job_phase.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(StartTrainingLockedTest, LeavesTheStateAsAJobThatTrains) {
  ChiefState state;
  JobSpec job;
  job.set_name("t");
  job.set_job_id("t-1");
  VariableDef def;
  def.name = "t/w";
  absl::MutexLock lock(&state.mu);
  ASSERT_TRUE(StartTrainingLocked(&state, job, {def}, 7).ok());
  EXPECT_EQ(state.job.job_id(), "t-1");
  ASSERT_EQ(state.defs.size(), 1u);
  EXPECT_EQ(state.defs[0].name, "t/w");
  ASSERT_NE(state.scheduler, nullptr);
  EXPECT_EQ(state.scheduler->done_steps(), 0);
  EXPECT_TRUE(state.scheduler->Lease(0, absl::InfiniteFuture()).has_value());
  EXPECT_EQ(state.generation, 1);
  EXPECT_EQ(state.status.state(), JobStatus::RUNNING);
  EXPECT_EQ(state.status.job_id(), "t-1");
  EXPECT_EQ(state.phase.kind(), JobPhase::Kind::kTraining);
}

TEST(StartTrainingLockedTest, RefusesAStateThatCannotStart) {
  ChiefState state;
  absl::MutexLock lock(&state.mu);
  ASSERT_TRUE(StartTrainingLocked(&state, JobSpec(), {}, 1).ok());
  // Training already: kStarting cannot follow.
  const absl::Status again = StartTrainingLocked(&state, JobSpec(), {}, 1);
  EXPECT_EQ(again.code(), absl::StatusCode::kInternal) << again;
}

}  // namespace
}  // namespace shardps
