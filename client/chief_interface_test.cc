// ChiefInterface::WaitFor and EndedOtherThan against a scripted in-process chief: the poll
// returns the first answer the condition accepts, treats failed calls as "not yet", stops
// on an on_answer error, and gives up at the deadline naming the last answer.
#include "client/chief_interface.h"

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

// Answers GetStatus from a script (repeating its last entry); the other calls are not used.
class ScriptedChief final : public ChiefInterface {
 public:
  explicit ScriptedChief(std::vector<absl::StatusOr<JobStatus>> answers)
      : answers_(std::move(answers)) {}

  const std::string& address() const override { return address_; }
  absl::StatusOr<JobStatus> GetStatus(absl::Duration timeout) override {
    absl::MutexLock lock(&mu_);
    timeouts_.push_back(timeout);
    return answers_[std::min(calls_++, answers_.size() - 1)];
  }
  absl::StatusOr<SubmitJobResponse> SubmitJob(const SubmitJobRequest&, absl::Duration) override {
    return absl::UnimplementedError("SubmitJob");
  }
  absl::StatusOr<AddStepsResponse> AddSteps(const AddStepsRequest&, absl::Duration) override {
    return absl::UnimplementedError("AddSteps");
  }
  absl::Status CancelJob(const CancelJobRequest&, absl::Duration) override {
    return absl::UnimplementedError("CancelJob");
  }
  absl::StatusOr<CheckpointInfo> Checkpoint(const CheckpointRequest&, absl::Duration) override {
    return absl::UnimplementedError("Checkpoint");
  }
  absl::Status ReportEval(const ReportEvalRequest&, absl::Duration) override {
    return absl::UnimplementedError("ReportEval");
  }
  absl::StatusOr<JoinJobResponse> JoinJob(const JoinJobRequest&, absl::Duration) override {
    return absl::UnimplementedError("JoinJob");
  }
  absl::StatusOr<LeaveJobResponse> LeaveJob(const LeaveJobRequest&, absl::Duration) override {
    return absl::UnimplementedError("LeaveJob");
  }
  absl::StatusOr<ScalePsResponse> ScalePs(const ScalePsRequest&, absl::Duration) override {
    return absl::UnimplementedError("ScalePs");
  }
  absl::StatusOr<MoveTableBucketsResponse> MoveTableBuckets(const MoveTableBucketsRequest&,
                                                            absl::Duration) override {
    return absl::UnimplementedError("not scripted");
  }

  size_t calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::vector<absl::Duration> timeouts() {
    absl::MutexLock lock(&mu_);
    return timeouts_;
  }

 private:
  const std::string address_ = "scripted:1";
  absl::Mutex mu_;
  const std::vector<absl::StatusOr<JobStatus>> answers_;
  size_t calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<absl::Duration> timeouts_ ABSL_GUARDED_BY(mu_);
};

JobStatus Status(JobStatus::State state, int64_t steps_done) {
  JobStatus s;
  s.set_state(state);
  s.set_job_id("job-1");
  s.set_steps_done(steps_done);
  s.set_total_steps(100);
  return s;
}

// Records the pauses instead of sleeping.
struct Pauses {
  std::vector<absl::Duration> seen;
  ChiefInterface::WaitOptions Options(absl::Duration interval) {
    ChiefInterface::WaitOptions options;
    options.poll_interval = interval;
    options.sleep = [this](absl::Duration d) { seen.push_back(d); };
    return options;
  }
};

bool AtLeast50(const JobStatus& s) { return s.steps_done() >= 50; }

TEST(ChiefInterfaceTest, WaitForReturnsTheFirstAnswerThatHolds) {
  ScriptedChief chief({Status(JobStatus::RUNNING, 10), Status(JobStatus::RUNNING, 60),
                       Status(JobStatus::RUNNING, 90)});
  Pauses pauses;
  ChiefInterface::WaitOptions options = pauses.Options(absl::Milliseconds(20));
  options.call_timeout = absl::Milliseconds(300);
  auto status = chief.WaitFor(AtLeast50, absl::InfiniteFuture(), options);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), 60);
  EXPECT_EQ(chief.calls(), 2u);
  EXPECT_EQ(pauses.seen, std::vector<absl::Duration>{absl::Milliseconds(20)});
  EXPECT_EQ(chief.timeouts(),
            (std::vector<absl::Duration>{absl::Milliseconds(300), absl::Milliseconds(300)}));
}

TEST(ChiefInterfaceTest, FailedCallsCountAsNotYet) {
  ScriptedChief chief({absl::UnavailableError("connection refused"),
                       absl::DeadlineExceededError("slow"), Status(JobStatus::RUNNING, 50)});
  Pauses pauses;
  auto status = chief.WaitFor(AtLeast50, absl::InfiniteFuture(), pauses.Options(absl::ZeroDuration()));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(chief.calls(), 3u);
}

TEST(ChiefInterfaceTest, OnAnswerSeesEveryAnswerAndItsErrorEndsTheWait) {
  ScriptedChief chief({absl::UnavailableError("down"), Status(JobStatus::RUNNING, 10),
                       Status(JobStatus::FAILED, 20), Status(JobStatus::RUNNING, 60)});
  Pauses pauses;
  ChiefInterface::WaitOptions options = pauses.Options(absl::ZeroDuration());
  std::vector<std::string> seen;
  options.on_answer = [&](const absl::StatusOr<JobStatus>& answer) {
    seen.push_back(answer.ok() ? JobStatus::State_Name(answer->state())
                               : std::string(absl::StatusCodeToString(answer.status().code())));
    return EndedOtherThan(JobStatus::SUCCEEDED, answer);
  };
  auto status = chief.WaitFor(AtLeast50, absl::InfiniteFuture(), options);
  EXPECT_EQ(status.status().code(), absl::StatusCode::kFailedPrecondition) << status.status();
  EXPECT_THAT(status.status().message(), HasSubstr("ended as FAILED"));
  EXPECT_EQ(seen, (std::vector<std::string>{"UNAVAILABLE", "RUNNING", "FAILED"}));
}

TEST(ChiefInterfaceTest, AtTheDeadlineFailsNamingTheLastAnswer) {
  ScriptedChief chief({Status(JobStatus::RUNNING, 10), Status(JobStatus::RUNNING, 12)});
  auto status = chief.WaitFor(AtLeast50, absl::Now() + absl::Milliseconds(50),
                              [] {
                                ChiefInterface::WaitOptions o;
                                o.poll_interval = absl::Milliseconds(5);
                                return o;
                              }());
  EXPECT_EQ(status.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(status.status().message(), HasSubstr("scripted:1"));
  EXPECT_THAT(status.status().message(), HasSubstr("RUNNING, 12/100 steps"));
  EXPECT_GE(chief.calls(), 2u);
}

TEST(ChiefInterfaceTest, APassedDeadlineStillPollsOnce) {
  ScriptedChief chief({Status(JobStatus::RUNNING, 70)});
  auto status = chief.WaitFor(AtLeast50, absl::InfinitePast());
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(chief.calls(), 1u);
}

TEST(ChiefInterfaceTest, EndedOtherThanFailsOnlyForAnotherEnd) {
  EXPECT_TRUE(EndedOtherThan(JobStatus::SUCCEEDED, Status(JobStatus::RUNNING, 1)).ok());
  EXPECT_TRUE(EndedOtherThan(JobStatus::SUCCEEDED, Status(JobStatus::NO_JOB, 0)).ok());
  EXPECT_TRUE(EndedOtherThan(JobStatus::SUCCEEDED, Status(JobStatus::SUCCEEDED, 100)).ok());
  EXPECT_TRUE(EndedOtherThan(JobStatus::SUCCEEDED, absl::UnavailableError("down")).ok());
  EXPECT_TRUE(EndedOtherThan(JobStatus::CANCELLED, Status(JobStatus::CANCELLED, 3)).ok());
  JobStatus cancelled = Status(JobStatus::CANCELLED, 3);
  cancelled.set_error("cancelled by shardctl");
  const absl::Status s = EndedOtherThan(JobStatus::SUCCEEDED, cancelled);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("job job-1 ended as CANCELLED: cancelled by shardctl"));
}

}  // namespace
}  // namespace shardps
