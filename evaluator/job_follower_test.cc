// The ps mode against a scripted chief and two in-process ps tasks holding a softmax model
// (evaluated on the real Fashion-MNIST test set). The loop never really waits: the hooks
// record each wait instead.
#include "evaluator/job_follower.h"

#include "absl/strings/match.h"
#include "evaluator/test_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using testing::FakeChief;
using testing::RecordingHooks;
using testing::Status;

class JobFollowerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(ps_.CreateSoftmax("fm", testing::TrainSoftmax(20)).ok());
    options_.chief = &chief_;
    options_.device = &device_;
    options_.connect_ps = [this](const std::vector<std::string>& addresses) {
      connected_.push_back(addresses);
      ++connects_;
      return ps_.Connect();
    };
  }

  EvalOutcome Run(RecordingHooks* hooks) { return FollowChiefJobs(options_, hooks->hooks); }

  std::vector<int64_t> EvaluatedSteps(const RecordingHooks& hooks) {
    std::vector<int64_t> steps;
    for (const EvalRecord& record : hooks.evals) steps.push_back(record.metrics.steps_done());
    return steps;
  }

  const JobSpec job_ = testing::SoftmaxJob("job-1");
  testing::LocalPs ps_;
  const ComputeDevice device_ = ComputeDevice::Cpu(1);
  FakeChief chief_;
  JobFollowerOptions options_;
  int connects_ = 0;
  std::vector<std::vector<std::string>> connected_;  // each connect's addresses
};

TEST_F(JobFollowerTest, EvaluatesWhileTrainingThenTheFinalModelAndSucceeds) {
  chief_.Then(JobStatus());  // no job yet
  chief_.Then(Status(job_, JobStatus::RUNNING, 0));
  JobStatus midway = Status(job_, JobStatus::RUNNING, 5);
  midway.set_elapsed_s(12.5);
  chief_.Then(midway);
  chief_.Then(Status(job_, JobStatus::RUNNING, 10, /*training_done=*/true));
  RecordingHooks hooks;
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded) << hooks.AllLogs();
  EXPECT_EQ(EvaluatedSteps(hooks), (std::vector<int64_t>{0, 5, 10}));
  ASSERT_EQ(hooks.evals.size(), 3u);
  // Each evaluation carries the job's time when its state was read.
  EXPECT_EQ(hooks.evals[1].metrics.job_elapsed_s(), 12.5);
  EXPECT_FALSE(hooks.evals[0].final);
  EXPECT_TRUE(hooks.evals[2].final);
  for (const EvalRecord& record : hooks.evals) {
    EXPECT_EQ(record.job_id, "job-1");
    EXPECT_EQ(record.metrics.examples(), 10000);
    EXPECT_EQ(record.metrics.checkpoint_id(), 0);
    EXPECT_TRUE(record.consistent);
    EXPECT_GT(record.metrics.accuracy(), 0.5);
  }
  auto reports = chief_.reports();
  ASSERT_EQ(reports.size(), 3u);
  EXPECT_TRUE(reports[2].final());
  EXPECT_EQ(reports[2].result().steps_done(), 10);
  EXPECT_EQ(hooks.contacts, chief_.status_calls());
  EXPECT_EQ(hooks.LogsWith("final test accuracy"), 1);
}

// A LiveEvaluator of the caller's (the Python package's): checked after each connection, asked
// for every evaluation, its metrics sent on with the follower's fields added.
struct LiveEvaluatorCalls {
  int checks = 0;
  int attempts = 0;
  bool fail_next = false;
  std::vector<bool> finals;
};
class ScriptedLiveEvaluator : public LiveEvaluator {
 public:
  explicit ScriptedLiveEvaluator(LiveEvaluatorCalls* calls) : calls_(*calls) {}
  absl::Status Check(PsClient* ps) override {
    ++calls_.checks;
    return ps->Discover();
  }
  absl::StatusOr<EvalMetrics> Evaluate(PsClient* /*ps*/, const JobStatus& status, bool final,
                                       int max_pull_attempts, bool* consistent) override {
    calls_.finals.push_back(final);
    calls_.attempts = max_pull_attempts;
    if (calls_.fail_next) {
      calls_.fail_next = false;
      return absl::InternalError("the user's code raised");
    }
    *consistent = status.steps_done() % 2 == 0;
    EvalMetrics metrics;
    metrics.set_step(100 + status.steps_done());
    metrics.set_accuracy(0.25);
    return metrics;
  }

 private:
  LiveEvaluatorCalls& calls_;  // outlives the follower, which destroys this at its end
};

TEST_F(JobFollowerTest, ACallersLiveEvaluatorEvaluatesInsteadOfTheModel) {
  LiveEvaluatorCalls calls;
  calls.fail_next = true;
  std::vector<std::string> created_for;
  options_.device = nullptr;  // not needed: the model is not the evaluator's
  options_.max_pull_attempts = 7;
  options_.new_evaluator = [&](const JobSpec& job)
      -> absl::StatusOr<std::unique_ptr<LiveEvaluator>> {
    created_for.push_back(job.job_id());
    return std::make_unique<ScriptedLiveEvaluator>(&calls);
  };
  chief_.Then(Status(job_, JobStatus::RUNNING, 0));
  chief_.Then(Status(job_, JobStatus::RUNNING, 0));  // after the failed first attempt
  chief_.Then(Status(job_, JobStatus::RUNNING, 3, /*training_done=*/true));
  RecordingHooks hooks;
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded) << hooks.AllLogs();
  EXPECT_EQ(created_for, std::vector<std::string>{"job-1"});
  EXPECT_EQ(calls.finals, (std::vector<bool>{false, false, true})) << hooks.AllLogs();
  EXPECT_EQ(calls.attempts, 7);
  EXPECT_EQ(calls.checks, 2);  // the failure dropped the connection; made again
  EXPECT_EQ(hooks.LogsWith("the user's code raised"), 1);
  ASSERT_EQ(hooks.evals.size(), 2u);
  EXPECT_EQ(hooks.evals[0].metrics.step(), 100);
  EXPECT_TRUE(hooks.evals[0].consistent);
  EXPECT_EQ(hooks.evals[1].metrics.step(), 103);
  EXPECT_EQ(hooks.evals[1].metrics.steps_done(), 3);
  EXPECT_FALSE(hooks.evals[1].consistent);
  EXPECT_TRUE(hooks.evals[1].final);
  ASSERT_EQ(chief_.reports().size(), 2u);
  EXPECT_EQ(chief_.reports()[1].result().accuracy(), 0.25);
}

TEST_F(JobFollowerTest, FailedOrCancelledJobEndsWithoutFinalEvaluation) {
  for (JobStatus::State end : {JobStatus::FAILED, JobStatus::CANCELLED}) {
    FakeChief chief;
    options_.chief = &chief;
    chief.Then(Status(job_, JobStatus::RUNNING, 0));
    JobStatus ended = Status(job_, end, 3);
    ended.set_error("a worker lost its disk");
    chief.Then(ended);
    RecordingHooks hooks;
    EXPECT_EQ(Run(&hooks), EvalOutcome::kJobFailed) << JobStatus::State_Name(end);
    ASSERT_EQ(hooks.evals.size(), 1u);
    EXPECT_FALSE(hooks.evals[0].final);
    EXPECT_EQ(hooks.LogsWith("a worker lost its disk"), 1) << hooks.AllLogs();
  }
}

// A RUNNING job with a phase does not advance (a ps is down, a rollback is under way): the
// evaluator neither evaluates nor leaves, and logs each kind of pause once.
TEST_F(JobFollowerTest, PausedJobIsWaitedForNotEvaluated) {
  chief_.Then(Status(job_, JobStatus::RUNNING, 0));
  for (int s = 1; s <= 4; ++s) {
    chief_.Then(Status(job_, JobStatus::RUNNING, 5, false,
                       absl::StrCat("paused: ps 1 (10.0.0.3:2222) unreachable for ", s, " s")));
  }
  chief_.Then(Status(job_, JobStatus::RUNNING, 5, false, "recovering: rolling back to 2"));
  chief_.Then(Status(job_, JobStatus::RUNNING, 5, false, "recovering: rolling back to 2"));
  chief_.Then(Status(job_, JobStatus::RUNNING, 7));
  chief_.Then(Status(job_, JobStatus::RUNNING, 10, true));
  RecordingHooks hooks;
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded);
  EXPECT_EQ(EvaluatedSteps(hooks), (std::vector<int64_t>{0, 7, 10}));
  EXPECT_EQ(hooks.LogsWith("is not advancing"), 2) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("advances again"), 1) << hooks.AllLogs();
}

// A chief that restarts is unreachable for a while, then answers with no job until it has
// resumed the job: the evaluator waits through both, with growing waits and one log line,
// and goes on with the resumed job.
TEST_F(JobFollowerTest, RidesOutAChiefRestartAndFollowsTheResumedJob) {
  options_.min_backoff = absl::Milliseconds(100);
  options_.max_backoff = absl::Milliseconds(400);
  chief_.Then(Status(job_, JobStatus::RUNNING, 4));
  for (int i = 0; i < 6; ++i) chief_.Then(absl::UnavailableError("connection refused"));
  chief_.Then(JobStatus());
  chief_.Then(JobStatus());
  chief_.Then(Status(job_, JobStatus::RUNNING, 2));  // resumed from a checkpoint at step 2
  chief_.Then(Status(job_, JobStatus::RUNNING, 9, true));
  RecordingHooks hooks;
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded) << hooks.AllLogs();
  // Rolled back below the last evaluation: its state is new, so it is evaluated.
  EXPECT_EQ(EvaluatedSteps(hooks), (std::vector<int64_t>{4, 2, 9}));
  EXPECT_EQ(hooks.LogsWith("chief unreachable"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("chief reachable again"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.LogsWith("no job"), 1) << hooks.AllLogs();
  // The waits while the chief was down: 100, 200, 400, 400, 400, 400 ms.
  std::vector<absl::Duration> down(hooks.sleeps.begin() + 1, hooks.sleeps.begin() + 7);
  EXPECT_EQ(down, (std::vector<absl::Duration>{absl::Milliseconds(100), absl::Milliseconds(200),
                                               absl::Milliseconds(400), absl::Milliseconds(400),
                                               absl::Milliseconds(400), absl::Milliseconds(400)}));
  // Only answers count as contact (the daemon's orphan clock runs while the chief is down).
  EXPECT_EQ(hooks.contacts, chief_.status_calls() - 6);
}

TEST_F(JobFollowerTest, ChiefGoneForGoodEndsOnlyByTheDaemonStopping) {
  chief_.Then(Status(job_, JobStatus::RUNNING, 0));
  chief_.Then(absl::UnavailableError("connection refused"));
  RecordingHooks hooks(/*max_sleeps=*/50);  // the orphan timeout, as the daemon's sleep says
  EXPECT_EQ(Run(&hooks), EvalOutcome::kStopped);
  EXPECT_EQ(hooks.LogsWith("chief unreachable"), 1) << hooks.AllLogs();
  EXPECT_EQ(hooks.sleeps.back(), options_.max_backoff);
}

// The chief ended the job (say its final-evaluation wait ran out) before the evaluator made
// its final evaluation: it makes it, then succeeds.
TEST_F(JobFollowerTest, SucceededJobGetsItsFinalEvaluation) {
  chief_.Then(Status(job_, JobStatus::RUNNING, 3));
  chief_.Then(Status(job_, JobStatus::SUCCEEDED, 10, true));
  RecordingHooks hooks;
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded);
  ASSERT_EQ(hooks.evals.size(), 2u);
  EXPECT_TRUE(hooks.evals[1].final);
  EXPECT_EQ(hooks.evals[1].metrics.steps_done(), 10);
}

// Long-lived: a job that ended before it was seen is not followed; the next one will be.
TEST_F(JobFollowerTest, JobThatEndedBeforeItWasSeenIsNotFollowedWhenLongLived) {
  options_.long_lived = true;
  chief_.Then(Status(job_, JobStatus::FAILED, 3));
  RecordingHooks hooks(/*max_sleeps=*/5);
  EXPECT_EQ(Run(&hooks), EvalOutcome::kStopped);
  EXPECT_TRUE(hooks.evals.empty());
  EXPECT_EQ(hooks.LogsWith("waiting for a running job"), 1) << hooks.AllLogs();
}

// The evaluator of one job that started late: a job already failed ends it (it waited
// forever before, after the chief had exited); one already succeeded gets its final
// evaluation, which the chief waits for.
TEST_F(JobFollowerTest, AnEvaluatorThatStartedLateFollowsItsEndedJobToItsEnd) {
  chief_.Then(Status(job_, JobStatus::FAILED, 3));
  RecordingHooks failed(/*max_sleeps=*/5);
  EXPECT_EQ(Run(&failed), EvalOutcome::kJobFailed) << failed.AllLogs();
  EXPECT_TRUE(failed.evals.empty());

  FakeChief chief;
  options_.chief = &chief;
  chief.Then(Status(job_, JobStatus::SUCCEEDED, 10, /*training_done=*/true));
  RecordingHooks succeeded(/*max_sleeps=*/5);
  EXPECT_EQ(Run(&succeeded), EvalOutcome::kSucceeded) << succeeded.AllLogs();
  ASSERT_EQ(succeeded.evals.size(), 1u);
  EXPECT_TRUE(succeeded.evals[0].final);
}

// A failing evaluation (here: the job's variables are not on the ps) is retried with backoff,
// re-connecting each time, and logged once.
TEST_F(JobFollowerTest, FailingEvaluationIsRetriedAndLoggedOnce) {
  options_.min_backoff = absl::Milliseconds(100);
  options_.max_backoff = absl::Milliseconds(200);
  JobSpec other = testing::SoftmaxJob("job-2");
  other.set_name("other");
  chief_.Then(Status(other, JobStatus::RUNNING, 0));
  RecordingHooks hooks(/*max_sleeps=*/6);
  EXPECT_EQ(Run(&hooks), EvalOutcome::kStopped);
  EXPECT_TRUE(hooks.evals.empty());
  EXPECT_EQ(hooks.LogsWith("\"other/dense_0/kernel\""), 1) << hooks.AllLogs();
  EXPECT_EQ(connects_, 6);
  EXPECT_EQ(hooks.sleeps.back(), absl::Milliseconds(200));
}

TEST_F(JobFollowerTest, FinalReportThatFailsIsSentAgain) {
  chief_.set_report_error(absl::UnavailableError("chief busy"));
  chief_.Then(Status(job_, JobStatus::RUNNING, 10, true));
  RecordingHooks hooks;
  hooks.on_sleep = [this](int sleeps) {
    if (sleeps == 3) chief_.set_report_error(absl::OkStatus());
  };
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded);
  EXPECT_EQ(hooks.evals.size(), 1u);  // evaluated once, reported until it got through
  EXPECT_EQ(chief_.reports().size(), 4u);
  EXPECT_TRUE(chief_.reports().back().final());
}

TEST_F(JobFollowerTest, LongLivedFollowsTheNextJob) {
  options_.long_lived = true;
  JobSpec next = testing::SoftmaxJob("job-2");
  chief_.Then(Status(job_, JobStatus::RUNNING, 10, true));
  chief_.Then(Status(job_, JobStatus::SUCCEEDED, 10, true));
  chief_.Then(Status(next, JobStatus::RUNNING, 0));
  chief_.Then(Status(next, JobStatus::CANCELLED, 1));
  RecordingHooks hooks(/*max_sleeps=*/10);
  EXPECT_EQ(Run(&hooks), EvalOutcome::kStopped);
  ASSERT_EQ(hooks.evals.size(), 2u);
  EXPECT_EQ(hooks.evals[0].job_id, "job-1");
  EXPECT_TRUE(hooks.evals[0].final);
  EXPECT_EQ(hooks.evals[1].job_id, "job-2");
}

TEST_F(JobFollowerTest, EvaluatesEveryEvalEveryStepsSteps) {
  JobSpec job = job_;
  job.set_eval_every_steps(10);
  for (int64_t steps : {0, 4, 9, 10, 15, 19, 21})
    chief_.Then(Status(job, JobStatus::RUNNING, steps));
  chief_.Then(Status(job, JobStatus::RUNNING, 25, true));
  RecordingHooks hooks;
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded);
  EXPECT_EQ(EvaluatedSteps(hooks), (std::vector<int64_t>{0, 10, 21, 25}));
}

// A job that moved onto other ps (scale-ps: JobStatus.ps changed) is read from those: the
// follower connects again with the new addresses.
TEST_F(JobFollowerTest, FollowsTheJobOntoItsNewPs) {
  auto with_ps = [&](int64_t steps, std::vector<std::string> ps, bool done = false) {
    JobStatus s = Status(job_, JobStatus::RUNNING, steps, done);
    for (const std::string& a : ps) s.add_ps()->set_address(a);
    s.set_layout_version(static_cast<int64_t>(ps.size()) - 1);
    return s;
  };
  chief_.Then(with_ps(0, {"ps0", "ps1"}));
  chief_.Then(with_ps(5, {"ps0", "ps1"}));
  chief_.Then(with_ps(10, {"ps0", "ps1", "ps2"}));
  chief_.Then(with_ps(15, {"ps0", "ps1", "ps2"}, true));
  RecordingHooks hooks;
  EXPECT_EQ(Run(&hooks), EvalOutcome::kSucceeded) << hooks.AllLogs();
  EXPECT_EQ(EvaluatedSteps(hooks), (std::vector<int64_t>{0, 5, 10, 15}));
  EXPECT_EQ(connected_, (std::vector<std::vector<std::string>>{{"ps0", "ps1"},
                                                               {"ps0", "ps1", "ps2"}}));
  EXPECT_THAT(hooks.AllLogs(), ::testing::HasSubstr("now runs on 3 ps"));
}

}  // namespace
}  // namespace shardps
