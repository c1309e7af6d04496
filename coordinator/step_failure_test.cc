#include "coordinator/step_failure.h"

#include <string>

#include "common/error_detail.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(StepFailureTest, OkIsNone) {
  EXPECT_EQ(ClassifyStepFailure(absl::OkStatus()).kind, StepFailureKind::kNone);
}

TEST(StepFailureTest, TransportErrorsWithoutDetailAreTheWorkers) {
  for (absl::Status s :
       {absl::UnavailableError("connection reset"), absl::DeadlineExceededError("deadline"),
        absl::CancelledError("x"), absl::UnknownError("x"), absl::InternalError("x")}) {
    EXPECT_EQ(ClassifyStepFailure(s).kind, StepFailureKind::kWorkerDown) << s;
  }
}

TEST(StepFailureTest, PsFailuresNameTheirPsWhateverTheCode) {
  StepFailure down = ClassifyStepFailure(
      WithDetail(absl::UnavailableError("step 3: pull: ps:2 (h:2224): connection refused"),
                 ErrorDetail::PS_UNAVAILABLE, 2));
  EXPECT_EQ(down.kind, StepFailureKind::kPsUnavailable);
  EXPECT_EQ(down.ps_task, 2);
  StepFailure late = ClassifyStepFailure(
      WithDetail(absl::DeadlineExceededError("x"), ErrorDetail::PS_UNAVAILABLE, 0));
  EXPECT_EQ(late.kind, StepFailureKind::kPsUnavailable);
  EXPECT_EQ(late.ps_task, 0);
  StepFailure lost = ClassifyStepFailure(
      WithDetail(absl::NotFoundError("no such shard"), ErrorDetail::PS_STATE_LOST, 1));
  EXPECT_EQ(lost.kind, StepFailureKind::kPsStateLost);
  EXPECT_EQ(lost.ps_task, 1);
}

TEST(StepFailureTest, AbortedIsStaleWithOrWithoutDetail) {
  EXPECT_EQ(ClassifyStepFailure(absl::AbortedError("stale step")).kind, StepFailureKind::kStale);
  EXPECT_EQ(
      ClassifyStepFailure(WithDetail(absl::AbortedError("x"), ErrorDetail::STALE_GENERATION)).kind,
      StepFailureKind::kStale);
  EXPECT_EQ(ClassifyStepFailure(WithDetail(absl::AbortedError("x"), ErrorDetail::STALE_STEP)).kind,
            StepFailureKind::kStale);
}

TEST(StepFailureTest, UnknownJobIsByDetailNotByText) {
  EXPECT_EQ(ClassifyStepFailure(WithDetail(absl::FailedPreconditionError("worker restarted"),
                                           ErrorDetail::UNKNOWN_JOB))
                .kind,
            StepFailureKind::kUnknownJob);
  // The words alone decide nothing.
  EXPECT_EQ(ClassifyStepFailure(absl::FailedPreconditionError("unknown job \"j\"")).kind,
            StepFailureKind::kStepFailed);
}

TEST(StepFailureTest, AProtocolMismatchIsTheWorkersNotTheSteps) {
  // From the worker itself, or relayed from a ps the worker called.
  EXPECT_EQ(ClassifyStepFailure(
                WithDetail(absl::FailedPreconditionError("incompatible shardps protocol: ..."),
                           ErrorDetail::PROTOCOL_MISMATCH))
                .kind,
            StepFailureKind::kIncompatible);
  EXPECT_STREQ(StepFailureKindName(StepFailureKind::kIncompatible), "incompatible protocol");
}

TEST(StepFailureTest, EverythingElseIsTheSteps) {
  for (absl::Status s :
       {absl::InvalidArgumentError("bad batch"), absl::OutOfRangeError("batch 938"),
        absl::FailedPreconditionError("variable missing"), absl::NotFoundError("no variable"),
        absl::ResourceExhaustedError("reply too large"), absl::DataLossError("crc"),
        absl::UnimplementedError("x"),
        // A shardps process answered with a detail that is not about what to do next.
        WithDetail(absl::InternalError("x"), ErrorDetail::LIMIT),
        WithDetail(absl::ResourceExhaustedError("x"), ErrorDetail::LIMIT)}) {
    EXPECT_EQ(ClassifyStepFailure(s).kind, StepFailureKind::kStepFailed) << s;
  }
}

TEST(StepFailureTest, KindsHaveNames) {
  EXPECT_EQ(std::string(StepFailureKindName(StepFailureKind::kPsStateLost)), "ps state lost");
  EXPECT_EQ(std::string(StepFailureKindName(StepFailureKind::kWorkerDown)), "worker down");
}

}  // namespace
}  // namespace shardps
