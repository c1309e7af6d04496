// The dispatcher with fake workers (calls answered when a test says so); its recovery watches
// an in-process ps that no test disturbs.
#include "coordinator/dispatcher.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/ps_client.h"
#include "coordinator/chief_state.h"
#include "coordinator/chief_test_util.h"
#include "coordinator/fake_worker.h"
#include "coordinator/in_process_ps.h"
#include "coordinator/job_phase.h"
#include "coordinator/job_spec.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/recovery.h"
#include "coordinator/scheduler.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using Kind = JobPhase::Kind;
constexpr absl::Duration kWait = absl::Seconds(20);

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPs::Options options;
    options.num_tasks = 1;
    tasks_ = *InProcessPs::Create(options);
    monitor_ = std::make_unique<PsMonitor>(tasks_->client(), PsMonitor::Options(), [] {});
    {
      absl::MutexLock lock(&state_.mu);
      state_.ps_addresses = {"ps0"};
    }
    recovery_ = std::make_unique<Recovery>(&state_, monitor_.get(), tasks_->client());
  }

  void TearDown() override {
    {
      absl::MutexLock lock(&state_.mu);
      state_.stopping = true;
    }
    if (thread_.joinable()) thread_.join();
    for (auto& w : workers_) {
      while (w->Finish(absl::UnavailableError("the test is over")) >= 0) {
      }
    }
    if (dispatcher_ != nullptr) dispatcher_->WaitForCalls();
    dispatcher_.reset();
    workers_.clear();
    recovery_.reset();
    monitor_.reset();
    tasks_->Shutdown();
  }

  // A job of `steps` async steps (`in_flight` leased per worker, each for `step_timeout`)
  // on `n` fake workers, dispatched from now on.
  void Start(int n, int64_t steps, int in_flight, absl::Duration step_timeout,
             Dispatcher::Options options) {
    std::vector<WorkerInterface*> workers;
    for (int i = 0; i < n; ++i) {
      workers_.push_back(std::make_unique<FakeWorker>(absl::StrCat("worker", i)));
      workers.push_back(workers_.back().get());
    }
    dispatcher_ = std::make_unique<Dispatcher>(&state_, workers, recovery_.get(), options);
    JobSpec job;
    job.set_name("t");
    job.set_job_id("t-1");
    job.set_mode(JobSpec::ASYNC);
    job.set_batch_size(64);
    job.set_steps_in_flight(in_flight);
    job.set_step_timeout_ms(absl::ToInt64Milliseconds(step_timeout));
    absl::MutexLock lock(&state_.mu);
    state_.start = absl::Now();
    ASSERT_TRUE(StartTrainingLocked(&state_, job, {}, steps).ok());
    dispatcher_->mu().AssertHeld();
    dispatcher_->StartJobLocked();
    thread_ = std::thread([this] { dispatcher_->Run(); });
  }

  JobStatus Status() {
    absl::MutexLock lock(&dispatcher_->mu());
    JobStatus status;
    dispatcher_->AddToStatusLocked(&status);
    state_.mu.AssertHeld();
    status.set_state(state_.status.state());
    status.set_steps_done(state_.scheduler->done_steps());
    return status;
  }

  Kind Phase() {
    absl::MutexLock lock(&state_.mu);
    return state_.phase.kind();
  }

  template <typename Pred>
  bool WaitFor(Pred pred) {
    const absl::Time deadline = absl::Now() + kWait;
    while (absl::Now() < deadline) {
      if (pred()) return true;
      absl::SleepFor(absl::Milliseconds(5));
    }
    return false;
  }

  std::unique_ptr<InProcessPs> tasks_;
  ChiefState state_;
  std::unique_ptr<PsMonitor> monitor_;
  std::unique_ptr<Recovery> recovery_;
  std::vector<std::unique_ptr<FakeWorker>> workers_;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::thread thread_;
};

TEST_F(DispatcherTest, LeasesUpToStepsInFlightAndEndsTheJobOnceEveryStepIsDone) {
  Start(1, 4, 2, absl::Seconds(60), Dispatcher::Options());
  FakeWorker* w = workers_[0].get();
  ASSERT_TRUE(w->WaitForPending(2));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(Status().workers(0).state(), "busy");
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(w->WaitForPending(2));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{1, 2}));
  while (w->steps_received() < 4 || !w->Pending().empty()) {
    ASSERT_TRUE(w->WaitForPending(1));
    EXPECT_GE(w->Finish(), 0);
  }
  ASSERT_TRUE(WaitFor([this] { return Phase() == Kind::kEnded; }));
  thread_.join();
  const JobStatus status = Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(status.steps_done(), 4);
  EXPECT_EQ(status.workers(0).steps_done(), 4);
  EXPECT_EQ(status.workers(0).state(), "idle");
  EXPECT_EQ(w->max_pending(), 2);
}

// Nothing happens but time passing: the lease's deadline alone wakes the dispatcher, which
// fails the worker, and once its call is back the probe interval alone brings it back.
TEST_F(DispatcherTest, AnExpiredLeaseFailsItsWorkerWithoutAnyEvent) {
  Dispatcher::Options options;
  options.probe_interval = absl::Milliseconds(100);
  Start(1, 2, 1, absl::Milliseconds(300), options);
  FakeWorker* w = workers_[0].get();
  ASSERT_TRUE(w->WaitForPending(1));
  const absl::Time leased = absl::Now();
  ASSERT_TRUE(WaitFor([this] { return Status().workers(0).failures() == 1; }));
  EXPECT_GE(absl::Now() - leased, absl::Milliseconds(250));
  JobStatus status = Status();
  EXPECT_EQ(status.workers(0).state(), "failed");
  EXPECT_EQ(status.workers(0).error(), "step 0 lease expired");
  // Its call ends at the same deadline (as a real worker interface ends it).
  EXPECT_EQ(w->Finish(absl::DeadlineExceededError("deadline exceeded")), 0);
  ASSERT_TRUE(WaitFor([w] { return w->starts() == 2; }));
  ASSERT_TRUE(w->WaitForPending(1));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{0}));
  EXPECT_EQ(Status().steps_done(), 0);
}

TEST_F(DispatcherTest, TheFinalEvaluationTimesOutWithoutAnyEvent) {
  Dispatcher::Options options;
  options.has_evaluator = true;
  options.final_eval_timeout = absl::Milliseconds(300);
  Start(1, 1, 1, absl::Seconds(60), options);
  FakeWorker* w = workers_[0].get();
  ASSERT_TRUE(w->WaitForPending(1));
  const absl::Time trained = absl::Now();
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(WaitFor([this] { return Phase() == Kind::kEnded; }));
  EXPECT_GE(absl::Now() - trained, absl::Milliseconds(300));
  EXPECT_EQ(Status().state(), JobStatus::SUCCEEDED);
}

TEST_F(DispatcherTest, TheFinalEvaluationEndsTheJobAtOnce) {
  Dispatcher::Options options;
  options.has_evaluator = true;
  options.final_eval_timeout = absl::Hours(1);
  Start(1, 1, 1, absl::Seconds(60), options);
  FakeWorker* w = workers_[0].get();
  ASSERT_TRUE(w->WaitForPending(1));
  EXPECT_EQ(w->Finish(), 0);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(Phase(), Kind::kTraining);
  {
    absl::MutexLock lock(&state_.mu);
    state_.final_eval = true;
    state_.WakeDispatcherLocked();
  }
  ASSERT_TRUE(WaitFor([this] { return Phase() == Kind::kEnded; }));
}

// A rollback moved the job to generation 2 while a step of generation 1 was in flight: its
// completion is ignored, and the step runs again.
TEST_F(DispatcherTest, AStepOfAnOldGenerationDoesNotCount) {
  Start(1, 2, 1, absl::Seconds(60), Dispatcher::Options());
  FakeWorker* w = workers_[0].get();
  ASSERT_TRUE(w->WaitForPending(1));
  {
    absl::MutexLock lock(&state_.mu);
    state_.generation = 2;
    ASSERT_TRUE(state_.scheduler->Restore(0, {}, 2).ok());
  }
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(w->WaitForPending(1));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{0}));
  EXPECT_EQ(Status().steps_done(), 0);
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(WaitFor([this] { return Status().steps_done() == 1; }));
}

TEST_F(DispatcherTest, AnEndedJobWaitsForItsCallsToDrain) {
  Start(1, 4, 2, absl::Seconds(60), Dispatcher::Options());
  FakeWorker* w = workers_[0].get();
  ASSERT_TRUE(w->WaitForPending(2));
  {
    absl::MutexLock lock(&state_.mu);
    state_.scheduler->Cancel();
    state_.EndJobLocked(JobStatus::CANCELLED, "cancelled by request");
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(Phase(), Kind::kEnding);
  EXPECT_EQ(w->Finish(), 0);
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(Phase(), Kind::kEnding);
  EXPECT_EQ(w->Finish(), 1);
  ASSERT_TRUE(WaitFor([this] { return Phase() == Kind::kEnded; }));
  EXPECT_EQ(w->steps_received(), 2);
}

// The chief is destroyed while calls are in flight: WaitForCalls returns only once every
// callback has, so that none reaches a destroyed chief.
TEST_F(DispatcherTest, WaitForCallsReturnsOnlyOnceEveryCallbackHas) {
  Start(1, 4, 2, absl::Seconds(60), Dispatcher::Options());
  FakeWorker* w = workers_[0].get();
  ASSERT_TRUE(w->WaitForPending(2));
  {
    absl::MutexLock lock(&state_.mu);
    state_.stopping = true;
  }
  thread_.join();
  std::atomic<bool> returned{false};
  std::thread waiter([this, &returned] {
    dispatcher_->WaitForCalls();
    returned = true;
  });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_FALSE(returned);
  EXPECT_EQ(w->Finish(), 0);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(returned);
  EXPECT_EQ(w->Finish(absl::UnavailableError("gone")), 1);
  waiter.join();
  EXPECT_TRUE(returned);
  // Stopping, the dispatcher leased nothing more.
  EXPECT_EQ(w->steps_received(), 2);
}

// Stopping with calls in flight that would never come back on their own: CancelCalls
// cancels them, each callback runs (with CANCELLED), and WaitForCalls returns at once.
TEST_F(DispatcherTest, CancelCallsBringsBackEveryCallSoWaitForCallsReturnsPromptly) {
  Start(2, 8, 2, absl::Seconds(60), Dispatcher::Options());
  for (auto& w : workers_) ASSERT_TRUE(w->WaitForPending(2));
  {
    absl::MutexLock lock(&state_.mu);
    state_.stopping = true;
  }
  thread_.join();
  const absl::Time t0 = absl::Now();
  dispatcher_->CancelCalls();
  absl::Notification returned;
  std::thread waiter([this, &returned] {
    dispatcher_->WaitForCalls();
    returned.Notify();
  });
  const bool prompt = returned.WaitForNotificationWithTimeout(kWait);
  EXPECT_TRUE(prompt) << "WaitForCalls still waits after CancelCalls";
  if (!prompt) {
    for (auto& w : workers_) {
      while (w->Finish(absl::UnavailableError("the test gives up")) >= 0) {
      }
    }
  }
  waiter.join();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  for (auto& w : workers_) {
    EXPECT_EQ(w->cancels(), 1) << w->address();
    EXPECT_TRUE(w->Pending().empty()) << w->address();  // each callback was called
    EXPECT_EQ(w->steps_received(), 2) << w->address();  // and leased nothing more
  }
  EXPECT_EQ(Status().steps_done(), 0);  // a cancelled step is not done
}

}  // namespace
}  // namespace shardps
