#include "coordinator/job_phase.h"

#include <set>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

using Kind = JobPhase::Kind;

constexpr Kind kAll[] = {Kind::kNoJob,         Kind::kStarting,       Kind::kTraining,
                         Kind::kTrainingDone,  Kind::kCheckpointCut,  Kind::kPsUnreachable,
                         Kind::kRecovering,    Kind::kScaling,        Kind::kInterrupted,
                         Kind::kEnding,        Kind::kEnded};

// Every move between two different phases that is allowed; every other one is refused.
const std::set<std::pair<Kind, Kind>>& AllowedMoves() {
  static const auto* const moves = new std::set<std::pair<Kind, Kind>>{
      {Kind::kNoJob, Kind::kStarting},
      {Kind::kStarting, Kind::kTraining},
      {Kind::kStarting, Kind::kEnded},
      {Kind::kStarting, Kind::kNoJob},
      {Kind::kTraining, Kind::kTrainingDone},
      {Kind::kTraining, Kind::kCheckpointCut},
      {Kind::kTraining, Kind::kPsUnreachable},
      {Kind::kTraining, Kind::kRecovering},
      {Kind::kTraining, Kind::kScaling},
      {Kind::kTraining, Kind::kInterrupted},
      {Kind::kTraining, Kind::kEnding},
      {Kind::kTrainingDone, Kind::kCheckpointCut},
      {Kind::kTrainingDone, Kind::kPsUnreachable},
      {Kind::kTrainingDone, Kind::kRecovering},
      {Kind::kTrainingDone, Kind::kScaling},
      {Kind::kTrainingDone, Kind::kInterrupted},
      {Kind::kTrainingDone, Kind::kEnding},
      {Kind::kCheckpointCut, Kind::kPsUnreachable},
      {Kind::kCheckpointCut, Kind::kScaling},
      {Kind::kCheckpointCut, Kind::kInterrupted},
      {Kind::kCheckpointCut, Kind::kEnding},
      {Kind::kPsUnreachable, Kind::kRecovering},
      {Kind::kPsUnreachable, Kind::kInterrupted},
      {Kind::kPsUnreachable, Kind::kEnding},
      {Kind::kRecovering, Kind::kTraining},
      {Kind::kRecovering, Kind::kPsUnreachable},
      {Kind::kRecovering, Kind::kInterrupted},
      {Kind::kRecovering, Kind::kEnding},
      {Kind::kScaling, Kind::kRecovering},
      {Kind::kScaling, Kind::kInterrupted},
      {Kind::kScaling, Kind::kEnding},
      {Kind::kInterrupted, Kind::kEnding},
      {Kind::kEnding, Kind::kEnded},
      {Kind::kEnded, Kind::kStarting},
  };
  return *moves;
}

// A phase brought to `kind` through allowed moves (a hold entered from kTraining).
JobPhase At(Kind kind) {
  JobPhase p;
  const std::vector<std::vector<Kind>> paths = {
      {},
      {Kind::kStarting},
      {Kind::kStarting, Kind::kTraining},
      {Kind::kStarting, Kind::kTraining, Kind::kTrainingDone},
      {Kind::kStarting, Kind::kTraining, Kind::kCheckpointCut},
      {Kind::kStarting, Kind::kTraining, Kind::kPsUnreachable},
      {Kind::kStarting, Kind::kTraining, Kind::kRecovering},
      {Kind::kStarting, Kind::kTraining, Kind::kCheckpointCut, Kind::kScaling},
      {Kind::kStarting, Kind::kTraining, Kind::kInterrupted},
      {Kind::kStarting, Kind::kTraining, Kind::kEnding},
      {Kind::kStarting, Kind::kTraining, Kind::kEnding, Kind::kEnded},
  };
  for (const std::vector<Kind>& path : paths) {
    if (!path.empty() && path.back() != kind) continue;
    if (path.empty() && kind != Kind::kNoJob) continue;
    for (Kind k : path) EXPECT_TRUE(p.MoveTo(k)) << JobPhase::Name(k);
    break;
  }
  EXPECT_EQ(p.kind(), kind);
  return p;
}

TEST(JobPhaseTest, StartsWithNoJob) {
  JobPhase p;
  EXPECT_EQ(p.kind(), Kind::kNoJob);
  EXPECT_FALSE(p.running());
  EXPECT_FALSE(p.active());
  EXPECT_EQ(p.Text(), "");
}

TEST(JobPhaseTest, EveryAllowedMoveIsMadeAndEveryOtherIsRefused) {
  for (Kind from : kAll) {
    for (Kind to : kAll) {
      const bool allowed = from == to || AllowedMoves().count({from, to}) > 0;
      EXPECT_EQ(JobPhase::Allowed(from, to), allowed)
          << JobPhase::Name(from) << " -> " << JobPhase::Name(to);
      JobPhase p = At(from);
      EXPECT_EQ(p.MoveTo(to, "why"), allowed)
          << JobPhase::Name(from) << " -> " << JobPhase::Name(to);
      EXPECT_EQ(p.kind(), allowed ? to : from);
    }
  }
}

TEST(JobPhaseTest, AHoldReturnsToThePhaseItWasEnteredFrom) {
  for (Kind hold :
       {Kind::kCheckpointCut, Kind::kPsUnreachable, Kind::kRecovering, Kind::kScaling}) {
    for (Kind from : {Kind::kTraining, Kind::kTrainingDone}) {
      JobPhase p = At(from);
      ASSERT_TRUE(p.MoveTo(hold, "x"));
      EXPECT_TRUE(p.held());
      EXPECT_EQ(p.final_checkpoint_done(), from == Kind::kTrainingDone);
      EXPECT_TRUE(p.Release(hold));
      EXPECT_EQ(p.kind(), from) << JobPhase::Name(hold);
      EXPECT_EQ(p.detail(), "");
    }
  }
}

// A scale's checkpoint cut turns into the scale's hold, which returns to where the cut was
// entered from and reads "scaling: ...".
TEST(JobPhaseTest, AScaleHoldsFromItsCut) {
  JobPhase p = At(Kind::kTraining);
  ASSERT_TRUE(p.MoveTo(Kind::kCheckpointCut, "finishing the steps below 8"));
  ASSERT_TRUE(p.MoveTo(Kind::kScaling, "restoring onto 3 ps"));
  EXPECT_FALSE(p.leasing());
  EXPECT_EQ(p.Text(), "scaling: restoring onto 3 ps");
  EXPECT_TRUE(p.Release(Kind::kScaling));
  EXPECT_EQ(p.kind(), Kind::kTraining);
}

TEST(JobPhaseTest, AHoldEnteredFromAnotherKeepsTheFirstOnesReturn) {
  JobPhase p = At(Kind::kTrainingDone);
  ASSERT_TRUE(p.MoveTo(Kind::kCheckpointCut, "finishing the steps below 8"));
  ASSERT_TRUE(p.MoveTo(Kind::kPsUnreachable, "ps 1 unreachable"));
  EXPECT_TRUE(p.final_checkpoint_done());
  EXPECT_FALSE(p.Release(Kind::kCheckpointCut)) << "not in that hold any more";
  EXPECT_EQ(p.kind(), Kind::kPsUnreachable);
  EXPECT_TRUE(p.Release(Kind::kPsUnreachable));
  EXPECT_EQ(p.kind(), Kind::kTrainingDone);
}

TEST(JobPhaseTest, ARecoveryEndsInTrainingWhereverItBegan) {
  JobPhase p = At(Kind::kTrainingDone);
  ASSERT_TRUE(p.MoveTo(Kind::kRecovering, "ps 0 restarted"));
  ASSERT_TRUE(p.MoveTo(Kind::kTraining));
  EXPECT_EQ(p.kind(), Kind::kTraining);
  EXPECT_FALSE(p.final_checkpoint_done());
}

TEST(JobPhaseTest, ReleaseOfAnotherPhaseChangesNothing) {
  JobPhase p = At(Kind::kTraining);
  EXPECT_FALSE(p.Release(Kind::kPsUnreachable));
  EXPECT_FALSE(p.Release(Kind::kTraining));
  EXPECT_EQ(p.kind(), Kind::kTraining);
  p = At(Kind::kInterrupted);
  EXPECT_FALSE(p.Release(Kind::kCheckpointCut));
  EXPECT_EQ(p.kind(), Kind::kInterrupted);
}

TEST(JobPhaseTest, StayingReplacesTheDetail) {
  JobPhase p = At(Kind::kTraining);
  ASSERT_TRUE(p.MoveTo(Kind::kPsUnreachable, "ps 1 (a:1) unreachable for 1 s: down"));
  ASSERT_TRUE(p.MoveTo(Kind::kPsUnreachable, "ps 1 (a:1) unreachable for 2 s: down"));
  EXPECT_EQ(p.Text(), "paused: ps 1 (a:1) unreachable for 2 s: down");
  EXPECT_TRUE(p.Release(Kind::kPsUnreachable));
  EXPECT_EQ(p.kind(), Kind::kTraining);
}

// The texts shardctl, the evaluator and the tests read.
TEST(JobPhaseTest, TextsAreThoseOfJobStatusPhase) {
  JobPhase p = At(Kind::kTraining);
  EXPECT_EQ(p.Text(), "");
  ASSERT_TRUE(p.MoveTo(Kind::kCheckpointCut, "finishing the steps below 40"));
  EXPECT_EQ(p.Text(), "checkpointing: finishing the steps below 40");
  ASSERT_TRUE(p.MoveTo(Kind::kPsUnreachable, "ps 0 (h:1) unreachable for 3 s: refused"));
  EXPECT_EQ(p.Text(), "paused: ps 0 (h:1) unreachable for 3 s: refused");
  ASSERT_TRUE(p.MoveTo(Kind::kRecovering, "ps 0 restarted; restoring generation 2"));
  EXPECT_EQ(p.Text(), "recovering: ps 0 restarted; restoring generation 2");
  ASSERT_TRUE(p.MoveTo(Kind::kInterrupted));
  EXPECT_EQ(p.Text(), "interrupted: the chief is stopping; a restarted chief resumes");
  ASSERT_TRUE(p.MoveTo(Kind::kEnding));
  EXPECT_EQ(p.Text(), "");
  EXPECT_EQ(At(Kind::kTrainingDone).Text(), "");
}

TEST(JobPhaseTest, WhatEachPhaseAllows) {
  for (Kind k : kAll) {
    const JobPhase p = At(k);
    const bool running = k == Kind::kTraining || k == Kind::kTrainingDone ||
                         k == Kind::kCheckpointCut || k == Kind::kPsUnreachable ||
                         k == Kind::kRecovering || k == Kind::kScaling ||
                         k == Kind::kInterrupted;
    EXPECT_EQ(p.running(), running) << JobPhase::Name(k);
    EXPECT_EQ(p.active(), running || k == Kind::kEnding) << JobPhase::Name(k);
    EXPECT_EQ(p.leasing(), k == Kind::kTraining || k == Kind::kTrainingDone ||
                               k == Kind::kCheckpointCut)
        << JobPhase::Name(k);
    EXPECT_EQ(p.final_checkpoint_done(), k == Kind::kTrainingDone) << JobPhase::Name(k);
  }
}

}  // namespace
}  // namespace shardps
