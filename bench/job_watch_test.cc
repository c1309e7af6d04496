// SubmitJob and FollowJob against a scripted chief: a submit tried again while the chief is
// unavailable and not after a refusal; a follow that sees every status, ends at SUCCEEDED, and
// gives up on a job that ended otherwise, another job, a chief gone or silent, or the timeout.
#include "bench/job_watch.h"

#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

using ::testing::HasSubstr;

class ScriptedChief final : public ChiefInterface {
 public:
  std::vector<absl::StatusOr<SubmitJobResponse>> submits;
  std::vector<absl::StatusOr<JobStatus>> statuses;  // the last repeats

  const std::string& address() const override { return address_; }
  absl::StatusOr<SubmitJobResponse> SubmitJob(const SubmitJobRequest& request,
                                              absl::Duration) override {
    absl::MutexLock lock(&mu_);
    last_json_ = request.job_json();
    return submits[std::min(submit_calls_++, submits.size() - 1)];
  }
  absl::StatusOr<JobStatus> GetStatus(absl::Duration) override {
    absl::MutexLock lock(&mu_);
    return statuses[std::min(status_calls_++, statuses.size() - 1)];
  }
  absl::StatusOr<AddStepsResponse> AddSteps(const AddStepsRequest&, absl::Duration) override {
    return absl::UnimplementedError("");
  }
  absl::Status CancelJob(const CancelJobRequest&, absl::Duration) override {
    return absl::UnimplementedError("");
  }
  absl::StatusOr<CheckpointInfo> Checkpoint(const CheckpointRequest&, absl::Duration) override {
    return absl::UnimplementedError("");
  }
  absl::Status ReportEval(const ReportEvalRequest&, absl::Duration) override {
    return absl::UnimplementedError("");
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
  size_t submit_calls() {
    absl::MutexLock lock(&mu_);
    return submit_calls_;
  }
  std::string last_json() {
    absl::MutexLock lock(&mu_);
    return last_json_;
  }

 private:
  const std::string address_ = "scripted:1";
  absl::Mutex mu_;
  size_t submit_calls_ ABSL_GUARDED_BY(mu_) = 0;
  size_t status_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_json_ ABSL_GUARDED_BY(mu_);
};

JobStatus Status(const std::string& job, JobStatus::State state, int64_t steps) {
  JobStatus s;
  s.set_job_id(job);
  s.set_state(state);
  s.set_steps_done(steps);
  s.set_total_steps(10);
  return s;
}

FollowOptions Fast() {
  FollowOptions options;
  options.poll_interval = absl::ZeroDuration();
  options.logs = [] { return std::string("--- logs ---"); };
  return options;
}

TEST(JobWatchTest, SubmitIsTriedAgainOnlyWhileTheChiefIsUnavailable) {
  ScriptedChief chief;
  SubmitJobResponse ok;
  ok.set_job_id("job-1");
  chief.submits = {absl::UnavailableError("ps starting"), ok};
  auto submitted = SubmitJob(chief, "{}");
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->job_id(), "job-1");
  EXPECT_EQ(chief.submit_calls(), 2u);
  EXPECT_EQ(chief.last_json(), "{}");

  ScriptedChief refusing;
  refusing.submits = {absl::InvalidArgumentError("bad job")};
  EXPECT_EQ(SubmitJob(refusing, "{}").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refusing.submit_calls(), 1u);
}

TEST(JobWatchTest, FollowSeesEveryStatusAndEndsAtSuccess) {
  ScriptedChief chief;
  chief.statuses = {Status("job-1", JobStatus::RUNNING, 2), absl::UnavailableError("blip"),
                    Status("job-1", JobStatus::RUNNING, 7),
                    Status("job-1", JobStatus::SUCCEEDED, 10)};
  FollowOptions options = Fast();
  std::vector<int64_t> seen;
  options.on_status = [&](const JobStatus& s) { seen.push_back(s.steps_done()); };
  auto last = FollowJob(chief, "job-1", options);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->steps_done(), 10);
  EXPECT_EQ(seen, (std::vector<int64_t>{2, 7, 10}));
}

TEST(JobWatchTest, FollowGivesUpOnAnotherEndOrAnotherJob) {
  ScriptedChief failed;
  failed.statuses = {Status("job-1", JobStatus::RUNNING, 2), Status("job-1", JobStatus::FAILED, 3)};
  auto a = FollowJob(failed, "job-1", Fast());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(a.status().message(), HasSubstr("job ended as FAILED"));
  EXPECT_THAT(a.status().message(), HasSubstr("--- logs ---"));

  ScriptedChief other;
  other.statuses = {Status("job-2", JobStatus::RUNNING, 2)};
  auto b = FollowJob(other, "job-1", Fast());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(b.status().message(), HasSubstr("runs job \"job-2\""));
}

TEST(JobWatchTest, FollowGivesUpOnAChiefGoneOrSilent) {
  ScriptedChief gone;
  gone.statuses = {absl::UnavailableError("refused")};
  FollowOptions options = Fast();
  options.chief_running = [] { return false; };
  auto a = FollowJob(gone, "job-1", options);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(a.status().message(), HasSubstr("refused"));

  ScriptedChief silent;
  silent.statuses = {absl::DeadlineExceededError("slow")};
  auto b = FollowJob(silent, "job-1", Fast());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable);
}

TEST(JobWatchTest, FollowTimesOutNamingTheStepsDone) {
  ScriptedChief chief;
  chief.statuses = {Status("job-1", JobStatus::RUNNING, 4)};
  FollowOptions options = Fast();
  options.poll_interval = absl::Milliseconds(5);
  options.timeout = absl::Milliseconds(50);
  auto s = FollowJob(chief, "job-1", options);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.status().message(), HasSubstr("(4/10 steps)"));
  EXPECT_THAT(s.status().message(), HasSubstr("--- logs ---"));
}

}  // namespace
}  // namespace bench
}  // namespace shardps
