// The chief's dispatch with fake workers (calls answered when a test says so) against an
// in-process ps task, on the real Fashion-MNIST (the chief reads it to size epochs).
#include "coordinator/chief.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/ps_client.h"
#include "common/data_root.h"
#include "common/error_detail.h"
#include "common/test_files.h"
#include "coordinator/fake_worker.h"
#include "coordinator/in_process_ps.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"
#include "tests/wait.h"

namespace shardps {
namespace {

constexpr absl::Duration kWait = absl::Seconds(20);

class ChiefTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InProcessPs::Options options;
    options.num_tasks = 1;
    auto tasks = InProcessPs::Create(options);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    tasks_ = *std::move(tasks);
    store_ = tasks_->store(0);
  }

  void TearDown() override {
    chief_.reset();
    tasks_->Shutdown();
  }

  // A chief over `n` fake workers; probes of failed workers wait an hour (never, in a test).
  void StartChief(int n, bool has_evaluator = false,
                  absl::Duration probe_interval = absl::Hours(1), DataRoot data_root = {}) {
    Chief::Options options;
    options.data_root = std::move(data_root);
    // Workers that join get fake interfaces the test can drive (joined_, in join order).
    options.connect_worker = [this](const std::string& address) {
      auto worker = std::make_unique<FakeWorker>(address);
      absl::MutexLock lock(&joined_mu_);
      joined_.push_back(worker.get());
      return std::unique_ptr<WorkerInterface>(std::move(worker));
    };
    options.has_evaluator = has_evaluator;
    options.ps_addresses = {"ps0"};
    options.ps = tasks_->client();
    options.probe_interval = probe_interval;
    for (int i = 0; i < n; ++i) {
      auto worker = std::make_unique<FakeWorker>(absl::StrCat("worker", i));
      workers_.push_back(worker.get());
      options.workers.push_back(std::move(worker));
    }
    auto chief = Chief::Create(std::move(options));
    ASSERT_TRUE(chief.ok()) << chief.status();
    chief_ = *std::move(chief);
  }

  void Submit(const std::string& extra) {
    auto submitted = chief_->Submit(absl::StrCat(
        R"({"name": "t", "model": "softmax", "batch_size": 64, "backend": "cpu", )", extra, "}"));
    ASSERT_TRUE(submitted.ok()) << submitted.status();
  }

  // Waits until the chief's status satisfies `pred`.
  template <typename Pred>
  bool WaitForStatus(Pred pred) {
    return testing::PollUntil([&] { return pred(chief_->Status()); }, absl::Now() + kWait,
                              absl::Milliseconds(5));
  }

  std::unique_ptr<InProcessPs> tasks_;
  ShardStore* store_ = nullptr;  // tasks_'s one
  std::vector<FakeWorker*> workers_;  // owned by the chief
  absl::Mutex joined_mu_;
  std::vector<FakeWorker*> joined_ ABSL_GUARDED_BY(joined_mu_);  // owned by the chief
  std::unique_ptr<Chief> chief_;

  FakeWorker* Joined(size_t i) {
    absl::MutexLock lock(&joined_mu_);
    return i < joined_.size() ? joined_[i] : nullptr;
  }
  absl::StatusOr<JoinJobResponse> Join(int index, const std::string& address,
                                       std::vector<std::string> ps = {}) {
    JoinJobRequest request;
    request.set_task_index(index);
    request.set_address(address);
    for (const std::string& a : ps) request.add_ps_addresses(a);
    return chief_->Join(request);
  }
};

// Elastic workers (docs/elastic.md): a worker TF_CONFIG does not name joins a running async
// job and takes leases beside the first; every step is done exactly once; the status counts
// the join and lists it as "joined".
TEST_F(ChiefTest, AWorkerThatJoinsARunningJobTakesLeases) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 12, "steps_in_flight": 1)");
  FakeWorker* w0 = workers_[0];
  ASSERT_TRUE(w0->WaitForPending(1));
  absl::StatusOr<JoinJobResponse> joined = Join(5, "worker5", {"ps0"});
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(joined->workers(), 2);
  EXPECT_FALSE(joined->job_id().empty());
  FakeWorker* w5 = Joined(0);
  ASSERT_NE(w5, nullptr);
  ASSERT_TRUE(w5->WaitForPending(1)) << "the joined worker got no step";
  std::vector<int64_t> done;
  while (chief_->Status().steps_done() < 12) {
    for (FakeWorker* w : {w0, w5}) {
      if (!w->Pending().empty()) done.push_back(w->Finish());
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  std::sort(done.begin(), done.end());
  std::vector<int64_t> all(12);
  for (int i = 0; i < 12; ++i) all[i] = i;
  EXPECT_EQ(done, all);  // each step once
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(status.worker_joins(), 1);
  ASSERT_EQ(status.workers_size(), 2);
  EXPECT_EQ(status.workers(1).index(), 5);
  EXPECT_EQ(status.workers(1).source(), "joined");
  EXPECT_EQ(status.workers(0).source(), "tf_config");
  EXPECT_GT(status.workers(1).steps_done(), 0);
  EXPECT_GT(status.workers(0).steps_done(), 0);
}

// A chief whose TF_CONFIG names no worker (TFJob's sparse form gives the chief none): a job
// is accepted (one replica per sync step by default: no worker count to take it from) and
// runs once a worker joins.
TEST_F(ChiefTest, AChiefWithoutTfConfigWorkersRunsAJobOnWorkersThatJoin) {
  StartChief(0);
  Submit(R"("mode": "sync", "steps": 4)");
  EXPECT_EQ(chief_->Status().job().num_replicas(), 1);
  ASSERT_TRUE(Join(2, "worker2").ok());
  FakeWorker* w = Joined(0);
  ASSERT_NE(w, nullptr);
  while (chief_->Status().steps_done() < 4) {
    ASSERT_TRUE(w->WaitForPending(1));
    w->Finish();
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().state(), JobStatus::SUCCEEDED);
}

// Each refusal changes nothing: a bad request, an index live at another address, another
// job's ps, and (once the job ended) a late worker; a worker the chief knows, at its address,
// rejoins as the same slot.
TEST_F(ChiefTest, JoinsThatCannotBeTakenAreRefusedAndChangeNothing) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 2, "steps_in_flight": 1)");
  FakeWorker* w0 = workers_[0];
  ASSERT_TRUE(w0->WaitForPending(1));
  EXPECT_EQ(Join(-1, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Join(1, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Join(1, "0.0.0.0:2222").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Join(1, "host:0").status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<JoinJobResponse> taken = Join(0, "elsewhere:1");
  EXPECT_EQ(taken.status().code(), absl::StatusCode::kAlreadyExists) << taken.status();
  EXPECT_NE(taken.status().message().find("live at worker0"), absl::string_view::npos);
  absl::StatusOr<JoinJobResponse> other = Join(1, "worker1", {"ps7", "ps8"});
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition) << other.status();
  EXPECT_NE(other.status().message().find("another job"), absl::string_view::npos);
  EXPECT_EQ(Joined(0), nullptr);
  EXPECT_EQ(chief_->Status().workers_size(), 1);
  EXPECT_EQ(chief_->Status().worker_joins(), 0);
  // The known worker at its own address: the same slot, still running the job.
  ASSERT_TRUE(Join(0, "worker0").ok());
  EXPECT_EQ(chief_->Status().workers_size(), 1);
  EXPECT_EQ(chief_->Status().workers(0).joins(), 1);
  while (chief_->Status().steps_done() < 2) {
    ASSERT_TRUE(w0->WaitForPending(1));
    w0->Finish();
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  absl::StatusOr<JoinJobResponse> late = Join(3, "worker3");
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition) << late.status();
  EXPECT_NE(late.status().message().find("arrived after job"), absl::string_view::npos);
  EXPECT_EQ(chief_->Status().workers_size(), 1);
}

// A worker that leaves (its SIGTERM) gets no more leases; the chief answers once its step in
// flight came back (done and counted), or, for a step that never comes back, at the wait's
// end, handing that step to another worker. The job still runs each step once.
TEST_F(ChiefTest, AWorkerThatLeavesHandsBackItsStepsAndGetsNoMore) {
  StartChief(2);
  Submit(R"("mode": "async", "steps": 10, "steps_in_flight": 1)");
  FakeWorker* w0 = workers_[0];
  FakeWorker* w1 = workers_[1];
  ASSERT_TRUE(w0->WaitForPending(1));
  ASSERT_TRUE(w1->WaitForPending(1));
  // Worker 1 leaves while its step is in flight: Leave waits for it.
  absl::Notification left;
  absl::StatusOr<LeaveJobResponse> leave;
  std::thread leaver([&] {
    LeaveJobRequest request;
    request.set_task_index(1);
    request.set_address("worker1");
    request.set_wait_ms(20000);
    leave = chief_->Leave(request);
    left.Notify();
  });
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(left.HasBeenNotified()) << "Leave returned with a step in flight";
  EXPECT_EQ(chief_->Status().workers(1).state(), "leaving");
  const int64_t step = w1->Finish();
  EXPECT_GE(step, 0);
  ASSERT_TRUE(left.WaitForNotificationWithTimeout(kWait));
  leaver.join();
  ASSERT_TRUE(leave.ok()) << leave.status();
  EXPECT_EQ(leave->steps_handed_back(), 0);
  const int received = w1->steps_received();
  while (chief_->Status().steps_done() < 10) {
    ASSERT_TRUE(w0->WaitForPending(1));
    w0->Finish();
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(w1->steps_received(), received) << "a left worker was leased a step";
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(status.steps_done(), 10);
  EXPECT_EQ(status.worker_leaves(), 1);
  EXPECT_TRUE(status.workers(1).left());
  EXPECT_EQ(status.workers(1).state(), "left");
  EXPECT_EQ(status.workers(0).steps_done() + status.workers(1).steps_done(), 10);
  LeaveJobRequest unknown;
  unknown.set_task_index(9);
  EXPECT_EQ(chief_->Leave(unknown).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ChiefTest, ALeavingWorkersStuckStepGoesToAnotherWorkerAtTheWaitsEnd) {
  StartChief(2);
  Submit(R"("mode": "async", "steps": 4, "steps_in_flight": 1)");
  FakeWorker* w0 = workers_[0];
  FakeWorker* w1 = workers_[1];
  ASSERT_TRUE(w0->WaitForPending(1));
  ASSERT_TRUE(w1->WaitForPending(1));
  const int64_t stuck = w1->Pending()[0];
  LeaveJobRequest request;
  request.set_task_index(1);
  request.set_address("worker1");
  request.set_wait_ms(200);
  absl::StatusOr<LeaveJobResponse> leave = chief_->Leave(request);
  ASSERT_TRUE(leave.ok()) << leave.status();
  EXPECT_EQ(leave->steps_handed_back(), 1);
  // The stuck step runs on worker 0 now.
  std::vector<int64_t> on_w0;
  while (chief_->Status().steps_done() < 4) {
    ASSERT_TRUE(w0->WaitForPending(1));
    on_w0.push_back(w0->Finish());
  }
  EXPECT_NE(std::find(on_w0.begin(), on_w0.end(), stuck), on_w0.end());
  // The job ends once the leaving worker's call has returned (it exits: the call fails).
  EXPECT_EQ(w1->Finish(absl::UnavailableError("the worker exited")), stuck);
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().steps_done(), 4);
  EXPECT_EQ(chief_->Status().state(), JobStatus::SUCCEEDED);
}


TEST_F(ChiefTest, KeepsTwoStepsInFlightPerWorker) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 6, "steps_in_flight": 2)");
  FakeWorker* w = workers_[0];
  ASSERT_TRUE(w->WaitForPending(2));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(chief_->Status().workers(0).state(), "busy");
  absl::SleepFor(absl::Milliseconds(300));  // a third is not sent
  EXPECT_EQ(w->steps_received(), 2);

  // One returns: the next is leased at once, and one call is still in flight throughout.
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(w->WaitForPending(2));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(chief_->Status().workers(0).state(), "busy");
  // The worker may finish them out of order.
  EXPECT_EQ(w->Finish(absl::OkStatus(), 2), 2);
  ASSERT_TRUE(w->WaitForPending(2));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{1, 3}));
  // The chief counts a step in the call's callback, which Finish runs.
  while (chief_->Status().steps_done() < 6) {
    ASSERT_TRUE(w->WaitForPending(1));
    EXPECT_GE(w->Finish(), 0);
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(status.steps_done(), 6);
  EXPECT_EQ(status.workers(0).steps_done(), 6);
  EXPECT_EQ(status.workers(0).state(), "idle");
  EXPECT_EQ(w->steps_received(), 6);
  EXPECT_EQ(w->max_pending(), 2);
  EXPECT_EQ(w->starts(), 1);
}

// With an evaluator (TF_CONFIG lists one, or chief --evaluator=yes) a job that has done its
// steps waits for the final evaluation before it succeeds; without one it ends at once.
TEST_F(ChiefTest, WithAnEvaluatorTheJobSucceedsOnlyAfterTheFinalEvaluation) {
  StartChief(1, /*has_evaluator=*/true);
  Submit(R"("mode": "async", "steps": 4, "steps_in_flight": 1)");
  FakeWorker* w = workers_[0];
  while (chief_->Status().steps_done() < 4) {
    ASSERT_TRUE(w->WaitForPending(1));
    EXPECT_GE(w->Finish(), 0);
  }
  ASSERT_TRUE(WaitForStatus([](const JobStatus& s) { return s.training_done(); }));
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_EQ(chief_->Status().state(), JobStatus::RUNNING) << "it did not wait";
  ReportEvalRequest report;
  report.set_job_id(chief_->Status().job_id());
  report.set_final(true);
  report.mutable_result()->set_steps_done(4);
  report.mutable_result()->set_accuracy(0.5);
  ASSERT_TRUE(chief_->ReportEval(report).ok());
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(chief_->Status().last_eval().steps_done(), 4);
}

TEST_F(ChiefTest, WithoutAnEvaluatorTheJobSucceedsWhenItsStepsAreDone) {
  StartChief(1, /*has_evaluator=*/false);
  Submit(R"("mode": "async", "steps": 4, "steps_in_flight": 1)");
  FakeWorker* w = workers_[0];
  while (chief_->Status().steps_done() < 4) {
    ASSERT_TRUE(w->WaitForPending(1));
    EXPECT_GE(w->Finish(), 0);
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().state(), JobStatus::SUCCEEDED);
  EXPECT_FALSE(chief_->Status().has_eval());
}

// With a data root, no job file can make the chief write or read elsewhere: its checkpoint
// dir, its warm start's source and its dataset (which may also lie in a dataset root, read
// only) are refused before anything starts, naming the field and the path.
TEST_F(ChiefTest, AJobNamingPathsOutsideTheDataRootIsRefusedBeforeAnythingStarts) {
  const std::string base = FreshTestDir("chief_data_root");
  ASSERT_EQ(::mkdir((base + "/root").c_str(), 0755), 0);
  ASSERT_EQ(::symlink("/etc", (base + "/root/escape").c_str()), 0);
  absl::StatusOr<DataRoot> root = DataRoot::Open(base + "/root", "data_root");
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_TRUE(root->AddDatasetRoots("/usr/share/datasets", "dataset_roots", true).ok());
  StartChief(1, false, absl::Hours(1), *root);
  const std::string head = R"({"name": "t", "model": "softmax", "batch_size": 64, )";
  struct Case {
    std::string fields, field, path;
  };
  for (const Case& c : std::vector<Case>{
           {R"("data_dir": "/etc")", "data_dir", "/etc"},
           {R"("data_dir": "escape/x")", "data_dir", "escape/x"},
           {R"("data_dir": "/usr/share/datasets/../../../etc")", "data_dir", "/etc"},
           {R"("checkpoint": {"dir": "/tmp/elsewhere", "every_steps": 5})", "checkpoint.dir",
            "/tmp/elsewhere"},
           {absl::StrCat(R"("checkpoint": {"dir": ")", base, R"(/root/escape", "every_steps": 5})"),
            "checkpoint.dir", "/root/escape"},
           {R"("warm_start": "/etc/shardps-ckpt")", "warm_start.from", "/etc/shardps-ckpt"}}) {
    absl::StatusOr<SubmitJobResponse> submitted =
        chief_->Submit(absl::StrCat(head, c.fields, "}"));
    ASSERT_FALSE(submitted.ok()) << c.fields;
    EXPECT_EQ(submitted.status().code(), absl::StatusCode::kPermissionDenied) << c.fields;
    EXPECT_NE(submitted.status().message().find(c.field), absl::string_view::npos)
        << submitted.status();
    EXPECT_NE(submitted.status().message().find(c.path), absl::string_view::npos)
        << submitted.status();
    EXPECT_EQ(chief_->Status().state(), JobStatus::NO_JOB) << c.fields;
  }
  // The default dataset (in /usr/share/datasets) and a checkpoint dir inside the root pass.
  absl::StatusOr<SubmitJobResponse> submitted = chief_->Submit(absl::StrCat(
      head, R"("checkpoint": {"dir": ")", base, R"(/root/ckpt", "every_steps": 5}})"));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
}

// A worker whose Shutdown is lost on the way (here twice) is told again: otherwise it would
// wait for steps forever after the job (a Python worker's loop never ended, found by CI). One
// that answers at once is told once.
TEST_F(ChiefTest, ShutdownClusterRetriesAWorkerUntilItHearsIt) {
  StartChief(2);
  workers_[1]->set_lost_shutdowns(2);
  chief_->ShutdownCluster("job t ended");
  EXPECT_EQ(workers_[0]->shutdowns(), 1);
  EXPECT_EQ(workers_[1]->shutdowns(), 3);
}

// Sync steps 0 and 1 (replicas of sync step 0) both need version 0 only, so one worker could
// hold both at once (and leave the other idle); sync mode's default keeps one per worker. Two
// workers, as a sync job may not have more replicas than workers.
TEST_F(ChiefTest, SyncDefaultsToOneStepInFlight) {
  StartChief(2);
  Submit(R"("mode": "sync", "num_replicas": 2, "steps": 4)");
  for (int sync_step = 0; sync_step < 2; ++sync_step) {
    for (FakeWorker* w : workers_) ASSERT_TRUE(w->WaitForPending(1));
    absl::SleepFor(absl::Milliseconds(100));
    for (FakeWorker* w : workers_) EXPECT_EQ(w->Pending().size(), 1u);
    for (FakeWorker* w : workers_) EXPECT_GE(w->Finish(), 2 * sync_step);
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().steps_done(), 4);
  for (FakeWorker* w : workers_) EXPECT_EQ(w->max_pending(), 1);
}

// Backup workers, 2 of 3: a sync step is done once two of its replicas are, the straggler
// does not hold it up, and whatever it answers later (a dropped gradient: OK; parameters
// that moved on too far: FAILED_PRECONDITION) neither counts nor fails anything; it gets the
// next step. The ps shards aggregate 2 of 3.
TEST_F(ChiefTest, BackupWorkersFinishASyncStepWithoutTheStraggler) {
  StartChief(3);
  Submit(R"("mode": "sync", "sync_backup_workers": 1, "steps": 6)");
  for (FakeWorker* w : workers_) ASSERT_TRUE(w->WaitForPending(1));
  // Sync step 0's replicas are steps 0..2, one per worker in whatever order they were leased;
  // the worker holding step 1 is the straggler.
  FakeWorker* by_step[3] = {nullptr, nullptr, nullptr};
  for (FakeWorker* w : workers_) {
    const std::vector<int64_t> pending = w->Pending();
    ASSERT_EQ(pending.size(), 1u);
    ASSERT_TRUE(pending[0] >= 0 && pending[0] < 3) << pending[0];
    by_step[pending[0]] = w;
  }
  for (FakeWorker* w : by_step) ASSERT_NE(w, nullptr);
  FakeWorker* const fast_a = by_step[0];
  FakeWorker* const straggler = by_step[1];
  FakeWorker* const fast_b = by_step[2];
  EXPECT_EQ(fast_a->Finish(), 0);
  EXPECT_EQ(fast_b->Finish(), 2);
  // Sync step 1 goes out to the two fast workers while the straggler still runs step 1.
  ASSERT_TRUE(fast_a->WaitForPending(1));
  ASSERT_TRUE(fast_b->WaitForPending(1));
  ASSERT_TRUE(WaitForStatus([](const JobStatus& s) { return s.steps_done() == 3; }));
  // The straggler's call returns (the ps dropped its gradient): not counted; it is given the
  // sync step's last replica.
  EXPECT_EQ(straggler->Finish(), 1);
  ASSERT_TRUE(straggler->WaitForPending(1));
  EXPECT_EQ(straggler->Pending(), (std::vector<int64_t>{5}));
  EXPECT_EQ(straggler->Finish(), 5);
  const int64_t fast = fast_a->Finish();
  EXPECT_TRUE(fast == 3 || fast == 4) << fast;
  ASSERT_TRUE(WaitForStatus([](const JobStatus& s) { return s.training_done(); }));
  // The other fast worker is now the straggler of sync step 1; the job waits for its call.
  EXPECT_FALSE(chief_->WaitForJobEnd(absl::Milliseconds(200)));
  EXPECT_EQ(fast_b->Finish(absl::FailedPreconditionError(
                "pull: version 1 of shard 't/dense_0/kernel' is no longer held")),
            fast == 3 ? 4 : 3);
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  const JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED) << status.error();
  EXPECT_EQ(status.steps_done(), 6);
  int64_t by_workers = 0;
  for (const WorkerInfo& w : status.workers()) {
    by_workers += w.steps_done();
    EXPECT_EQ(w.failures(), 0) << w.index();
  }
  EXPECT_EQ(by_workers, 4) << "2 completions for each of the 2 sync steps";
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i] == straggler) {
      EXPECT_EQ(status.workers(static_cast<int>(i)).steps_done(), 1);
    }
  }
  ListShardsResponse shards;
  ASSERT_TRUE(store_->ListShards(ListShardsRequest(), &shards).ok());
  ASSERT_GT(shards.shards_size(), 0);
  for (const ShardInfo& shard : shards.shards()) {
    EXPECT_EQ(shard.spec().update().num_replicas(), 3);
    EXPECT_EQ(shard.spec().update().replicas_to_aggregate(), 2);
  }
}

// Without backup workers the shards' specs are those of before: replicas_to_aggregate unset.
TEST_F(ChiefTest, SyncWithoutBackupWorkersAggregatesEveryReplica) {
  StartChief(2);
  Submit(R"("mode": "sync", "steps": 2)");
  for (FakeWorker* w : workers_) ASSERT_TRUE(w->WaitForPending(1));
  // The two replicas of the sync step are steps 0 and 1, leased in either order.
  const int64_t first = workers_[0]->Finish();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(chief_->Status().training_done()) << "a sync step needs every replica";
  const int64_t second = workers_[1]->Finish();
  EXPECT_EQ(std::min(first, second), 0);
  EXPECT_EQ(std::max(first, second), 1);
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().steps_done(), 2);
  ListShardsResponse shards;
  ASSERT_TRUE(store_->ListShards(ListShardsRequest(), &shards).ok());
  ASSERT_GT(shards.shards_size(), 0);
  for (const ShardInfo& shard : shards.shards()) {
    EXPECT_EQ(shard.spec().update().replicas_to_aggregate(), 0);
  }
}

TEST_F(ChiefTest, StepsInFlightOneLeasesOneStepAtATime) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 2, "steps_in_flight": 1)");
  FakeWorker* w = workers_[0];
  ASSERT_TRUE(w->WaitForPending(1));
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(w->Pending(), (std::vector<int64_t>{0}));
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(w->WaitForPending(1));
  EXPECT_EQ(w->Finish(), 1);
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(w->max_pending(), 1);
}

// The job's staleness policy reaches every shard's UpdateSpec.
TEST_F(ChiefTest, TheStalenessPolicyGoesIntoEveryShardsUpdateSpec) {
  StartChief(1);
  Submit(R"("mode": "stale", "staleness": 1, "steps": 1, "staleness_lr": "inverse",
            "delay_compensation": 0.04, "delay_compensation_adaptive": true)");
  FakeWorker* w = workers_[0];
  ASSERT_TRUE(w->WaitForPending(1));  // the variables exist once a step is leased
  ListShardsResponse shards;
  ASSERT_TRUE(store_->ListShards({}, &shards).ok());
  ASSERT_EQ(shards.shards_size(), 2);  // softmax: kernel and bias
  for (const ShardInfo& shard : shards.shards()) {
    const UpdateSpec& update = shard.spec().update();
    EXPECT_EQ(update.mode(), UpdateSpec::ASYNC) << shard.spec().name();
    EXPECT_EQ(update.staleness_lr(), UpdateSpec::INVERSE) << shard.spec().name();
    EXPECT_EQ(update.delay_compensation(), 0.04) << shard.spec().name();
    EXPECT_TRUE(update.delay_compensation_adaptive()) << shard.spec().name();
    EXPECT_EQ(update.retained_versions(), 0) << shard.spec().name();  // the ps' default
  }
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
}

// Worker 0 holds steps 0 and 1 when its first call fails as a dead worker's would: both go back
// to the queue at once and worker 1 runs them. Worker 0's other call then returns late with
// success: that completion counts (nobody else finished step 1 yet), and every step is counted
// once.
TEST_F(ChiefTest, WorkerFailureRequeuesEveryStepItHeld) {
  StartChief(2);
  Submit(R"("mode": "async", "steps": 8, "steps_in_flight": 2)");
  FakeWorker* w0 = workers_[0];
  FakeWorker* w1 = workers_[1];
  ASSERT_TRUE(w0->WaitForPending(2));
  ASSERT_TRUE(w1->WaitForPending(2));
  std::vector<int64_t> held0 = w0->Pending();
  std::vector<int64_t> held1 = w1->Pending();
  ASSERT_EQ(held0.size(), 2u);
  ASSERT_EQ(held1.size(), 2u);
  EXPECT_EQ(chief_->Status().workers(0).state(), "busy");

  EXPECT_EQ(w0->Finish(absl::UnavailableError("connection reset"), held0[0]), held0[0]);
  ASSERT_TRUE(WaitForStatus([](const JobStatus& s) { return s.steps_requeued() == 2; }));
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.workers(0).state(), "failed");
  EXPECT_EQ(status.workers(0).failures(), 1);

  // Worker 1 finishes one of its own: it is given the lowest re-queued step next.
  EXPECT_EQ(w1->Finish(absl::OkStatus(), held1[0]), held1[0]);
  ASSERT_TRUE(w1->WaitForPending(2));
  EXPECT_EQ(w1->Pending(), (std::vector<int64_t>{held1[1], std::min(held0[0], held0[1])}));

  // Worker 0's other call comes back late but done: it counts, and the step is not re-run.
  EXPECT_EQ(w0->Finish(absl::OkStatus(), held0[1]), held0[1]);
  status = chief_->Status();
  EXPECT_EQ(status.workers(0).steps_done(), 1);
  EXPECT_EQ(status.workers(0).state(), "failed");  // stays failed until probed

  // Worker 1 runs everything else.
  std::vector<int64_t> run_by_1 = {held1[0]};
  while (chief_->Status().steps_done() < 8) {
    ASSERT_TRUE(w1->WaitForPending(1)) << chief_->Status().DebugString();
    run_by_1.push_back(w1->Finish());
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(status.steps_done(), 8);
  EXPECT_EQ(status.workers(0).steps_done() + status.workers(1).steps_done(), 8);
  EXPECT_EQ(status.workers(1).steps_done(), 7);
  std::sort(run_by_1.begin(), run_by_1.end());
  EXPECT_EQ(std::count(run_by_1.begin(), run_by_1.end(), held0[1]), 0)
      << "step " << held0[1] << " was completed by worker 0 and must not run again";
  EXPECT_EQ(std::adjacent_find(run_by_1.begin(), run_by_1.end()), run_by_1.end());
  EXPECT_EQ(w0->steps_received(), 2);  // never probed again in this test
}

// A stale step (ABORTED) and a ps failure behind the worker (PS_UNAVAILABLE) are not the
// worker's fault: it is not marked failed, the step goes back to the queue and runs again,
// and neither counts towards max_step_attempts (4): five stale answers do not fail the job.
TEST_F(ChiefTest, StaleStepsAndPsFailuresDoNotFailTheWorker) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 2, "steps_in_flight": 1)");
  FakeWorker* w = workers_[0];
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(w->WaitForPending(1)) << "attempt " << i << ": " << chief_->Status().DebugString();
    EXPECT_EQ(w->Pending(), (std::vector<int64_t>{0}));
    EXPECT_EQ(w->Finish(absl::AbortedError("sync step 0 already applied")), 0);
  }
  ASSERT_TRUE(w->WaitForPending(1)) << chief_->Status().DebugString();
  EXPECT_EQ(w->Finish(WithDetail(absl::UnavailableError(
                                     "step 0: pull: ps:0 (ps0): connection refused"),
                                 ErrorDetail::PS_UNAVAILABLE, 0)),
            0);
  JobStatus status = chief_->Status();
  EXPECT_NE(status.workers(0).state(), "failed");
  EXPECT_EQ(status.workers(0).failures(), 0);
  EXPECT_EQ(status.state(), JobStatus::RUNNING);

  // The worker goes on with the re-queued step and the rest.
  while (chief_->Status().steps_done() < 2) {
    ASSERT_TRUE(w->WaitForPending(1)) << chief_->Status().DebugString();
    EXPECT_GE(w->Finish(), 0);
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(status.workers(0).failures(), 0);
  EXPECT_EQ(status.workers(0).steps_done(), 2);
  EXPECT_EQ(status.steps_requeued(), 6);
  EXPECT_EQ(w->starts(), 1);
}

// A worker that answers UNKNOWN_JOB (it restarted) is sent StartJob again and runs the step;
// the detail decides, not the words of the message.
TEST_F(ChiefTest, AWorkerThatLostTheJobIsStartedAgain) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 1, "steps_in_flight": 1)");
  FakeWorker* w = workers_[0];
  ASSERT_TRUE(w->WaitForPending(1));
  EXPECT_EQ(w->Finish(WithDetail(absl::FailedPreconditionError("this worker restarted"),
                                 ErrorDetail::UNKNOWN_JOB)),
            0);
  ASSERT_TRUE(w->WaitForPending(1)) << chief_->Status().DebugString();
  EXPECT_EQ(w->starts(), 2);
  EXPECT_EQ(w->Finish(), 0);
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_EQ(status.workers(0).failures(), 0);
}

// A worker of another protocol version refuses every StartJob: it shows as failed with the
// error naming both versions, and the job goes on without it however often it is probed
// (refusals count per worker: one bad worker cannot fail a job others can run).
TEST_F(ChiefTest, AWorkerThatKeepsRefusingTheJobIsLeftOutWhileOthersRunIt) {
  StartChief(2, /*has_evaluator=*/false, /*probe_interval=*/absl::Milliseconds(5));
  workers_[1]->set_start_error(WithDetail(
      absl::FailedPreconditionError("incompatible shardps protocol: the client at x speaks "
                                    "protocol 1, this worker speaks protocol 2"),
      ErrorDetail::PROTOCOL_MISMATCH));
  Submit(R"("mode": "async", "steps": 2, "steps_in_flight": 1)");
  FakeWorker* good = workers_[0];
  ASSERT_TRUE(good->WaitForPending(1));
  // More refusals than max_step_attempts (4) x workers.
  const absl::Time deadline = absl::Now() + kWait;
  while (workers_[1]->starts() < 12 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GE(workers_[1]->starts(), 12);
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::RUNNING) << status.error();
  EXPECT_EQ(status.workers(1).state(), "failed");
  EXPECT_NE(status.workers(1).error().find("this worker speaks protocol 2"), std::string::npos)
      << status.workers(1).DebugString();
  EXPECT_EQ(good->Finish(), 0);
  ASSERT_TRUE(good->WaitForPending(1));
  EXPECT_EQ(good->Finish(), 1);
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().state(), JobStatus::SUCCEEDED) << chief_->Status().error();
}

// A worker not up yet when the job starts (its StartJob cannot connect) is unreachable, not
// failed, with no failure counted; the job runs on the other one, and the worker joins once
// it answers.
TEST_F(ChiefTest, AWorkerNotUpYetIsUnreachableNotFailedAndJoinsOnceItAnswers) {
  StartChief(2, /*has_evaluator=*/false, /*probe_interval=*/absl::Milliseconds(5));
  workers_[1]->set_start_error(absl::UnavailableError(
      "failed to connect to all addresses; last error: Connection refused"));
  Submit(R"("mode": "async", "steps": 6, "steps_in_flight": 1)");
  FakeWorker* up = workers_[0];
  FakeWorker* late = workers_[1];
  ASSERT_TRUE(up->WaitForPending(1));
  ASSERT_TRUE(WaitForStatus([](const JobStatus& s) {
    return s.workers_size() == 2 && s.workers(1).state() == "unreachable";
  })) << chief_->Status().DebugString();
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.workers(1).failures(), 0);
  EXPECT_NE(status.workers(1).error().find("Connection refused"), std::string::npos);
  EXPECT_EQ(up->Finish(), 0);

  late->set_start_error(absl::OkStatus());
  ASSERT_TRUE(late->WaitForPending(1)) << chief_->Status().DebugString();
  EXPECT_EQ(chief_->Status().workers(1).failures(), 0);
  const absl::Time deadline = absl::Now() + kWait;
  while (chief_->Status().steps_done() < 6) {
    ASSERT_LT(absl::Now(), deadline) << chief_->Status().DebugString();
    bool finished = false;
    for (FakeWorker* w : {late, up}) {
      if (!w->Pending().empty()) {
        w->Finish();
        finished = true;
      }
    }
    if (!finished) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::SUCCEEDED);
  EXPECT_GE(status.workers(1).steps_done(), 1);
}

// When every worker keeps refusing, the job cannot run: it fails, naming the last refusal.
TEST_F(ChiefTest, WhenEveryWorkerKeepsRefusingTheJobFails) {
  StartChief(2, /*has_evaluator=*/false, /*probe_interval=*/absl::Milliseconds(5));
  for (FakeWorker* w : workers_) {
    w->set_start_error(absl::InvalidArgumentError("data_dir \"/nope\": no such directory"));
  }
  Submit(R"("mode": "async", "steps": 2)");
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::FAILED);
  EXPECT_NE(status.error().find("workers refuse the job"), std::string::npos) << status.error();
  EXPECT_NE(status.error().find("/nope"), std::string::npos) << status.error();
}

// A step that fails by itself (here FAILED_PRECONDITION without a detail) counts: the fourth
// failure of the same step fails the job, naming the step.
TEST_F(ChiefTest, AStepThatKeepsFailingFailsTheJob) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 3, "steps_in_flight": 1)");
  FakeWorker* w = workers_[0];
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(w->WaitForPending(1)) << "attempt " << i;
    EXPECT_EQ(w->Finish(absl::FailedPreconditionError("variable \"t/dense_0/kernel\" missing")),
              0);
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::FAILED);
  EXPECT_NE(status.error().find("step 0 failed 4 times"), std::string::npos) << status.error();
  EXPECT_EQ(status.workers(0).failures(), 0);
}

// Issue 23 §5: a sync step whose summed update the ps refuses (it would make a parameter
// non-finite) fails for all its replicas: the replica whose push completed it, and the
// others, whose next pull waits for the version the step never reaches. Each failure
// counts, so the step is not leased forever: the job fails after the attempt limit, saying
// why (the ps' message).
TEST_F(ChiefTest, AStepThePsRefusesFailsTheJobAfterTheAttemptLimitSayingWhy) {
  StartChief(2);
  Submit(R"("mode": "sync", "num_replicas": 2, "steps": 20)");
  const absl::Status refused = absl::InvalidArgumentError(
      "step 0: push: push rows to shard 'emb/part_0': variable 'emb' (shard 'emb/part_0'): "
      "sync step 0 (update 1, the sum of its replicas' gradients) would make row 3 (element 0) "
      "of the parameters or an optimizer slot non-finite; the step is refused for all its "
      "replicas");
  // Replica 0's part of sync step 0 went in; replica 1's push completed the step: refused.
  for (FakeWorker* w : workers_) ASSERT_TRUE(w->WaitForPending(1));
  workers_[0]->Finish();
  workers_[1]->Finish(refused);
  // From here on every call fails as the ps answers it: re-runs' pushes, next steps' pulls.
  int calls = 0;
  while (!chief_->WaitForJobEnd(absl::Milliseconds(10)) && calls < 200) {
    for (FakeWorker* w : workers_) {
      if (w->Finish(refused) >= 0) ++calls;
    }
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait)) << calls << " calls failed and the job goes on";
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.state(), JobStatus::FAILED);
  EXPECT_NE(status.error().find("failed 4 times"), std::string::npos) << status.error();
  EXPECT_NE(status.error().find("non-finite"), std::string::npos) << status.error();
  EXPECT_LE(calls, 2 * 4) << status.error();
}

// A job that ends (here: cancelled) with two calls in flight on one worker ends only when both
// are back.
TEST_F(ChiefTest, JobEndsOnlyWhenEveryCallIsBack) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 100)");  // steps_in_flight defaults to 2
  FakeWorker* w = workers_[0];
  ASSERT_TRUE(w->WaitForPending(2));
  ASSERT_TRUE(chief_->Cancel("").ok());
  EXPECT_FALSE(chief_->WaitForJobEnd(absl::Milliseconds(300)));
  EXPECT_GE(w->Finish(), 0);
  EXPECT_FALSE(chief_->WaitForJobEnd(absl::Milliseconds(300)));
  EXPECT_GE(w->Finish(), 0);
  EXPECT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().state(), JobStatus::CANCELLED);
  EXPECT_EQ(w->steps_received(), 2);
}

// A data_dir that cannot be read is the job file's fault: INVALID_ARGUMENT naming the field
// (shardctl and the chief exit 2 on it), and no job starts.
TEST_F(ChiefTest, UnreadableDataDirIsInvalidArgument) {
  StartChief(1);
  auto submitted = chief_->Submit(
      R"({"name": "t", "model": "softmax", "steps": 5, "data_dir": "/no/such/fashion-mnist"})");
  ASSERT_FALSE(submitted.ok());
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument) << submitted.status();
  EXPECT_NE(submitted.status().message().find("\"data_dir\""), absl::string_view::npos)
      << submitted.status();
  EXPECT_NE(submitted.status().message().find("/no/such/fashion-mnist"), absl::string_view::npos)
      << submitted.status();
  EXPECT_EQ(chief_->Status().state(), JobStatus::NO_JOB);
  EXPECT_EQ(workers_[0]->steps_received(), 0);
}

// The chief is destroyed while a job runs with two calls in flight: the destructor returns
// only once both callbacks have, so that neither reaches a destroyed chief, even when the
// calls it cancels come back only later.
TEST_F(ChiefTest, DestructionWaitsForEveryCallInFlight) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 100, "steps_in_flight": 2)");
  FakeWorker* w = workers_[0];
  w->set_answer_cancel(false);
  ASSERT_TRUE(w->WaitForPending(2));
  std::atomic<bool> destroyed{false};
  std::thread destroy([this, &destroyed] {
    chief_.reset();
    destroyed = true;
  });
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_FALSE(destroyed);
  EXPECT_EQ(w->cancels(), 1);
  EXPECT_GE(w->Finish(), 0);  // its callback finds the chief whole, and leases nothing more
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_FALSE(destroyed);
  EXPECT_EQ(w->steps_received(), 2);
  // The last callback lets the destructor go on, which destroys the worker too: nothing
  // of it is used after this call.
  w->Finish(absl::UnavailableError("the chief is gone"));
  destroy.join();
  EXPECT_TRUE(destroyed);
}

// The chief is destroyed (SIGTERM's path) while two steps are in flight on workers that would
// hold them for their whole deadline: it cancels them, their callbacks run, and it returns
// at once.
TEST_F(ChiefTest, DestructionCancelsTheCallsInFlightAndReturnsPromptly) {
  StartChief(2);
  Submit(R"("mode": "async", "steps": 100, "steps_in_flight": 1, "step_timeout_ms": 600000)");
  for (FakeWorker* w : workers_) ASSERT_TRUE(w->WaitForPending(1));
  absl::Notification destroyed;
  const absl::Time t0 = absl::Now();
  std::thread destroy([this, &destroyed] {
    chief_.reset();
    destroyed.Notify();
  });
  const bool prompt = destroyed.WaitForNotificationWithTimeout(kWait);
  EXPECT_TRUE(prompt) << "the destructor still waits for its calls";
  if (!prompt) {
    // The workers live until the destructor returns, and it waits for these.
    for (FakeWorker* w : workers_) w->Finish(absl::UnavailableError("the test gives up"));
  }
  destroy.join();
  workers_.clear();  // destroyed with the chief
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

// A submission right after a job ended waits for that job's calls to drain, then starts.
TEST_F(ChiefTest, ASubmissionAfterACancelStartsOnceTheCallsAreBack) {
  StartChief(1);
  Submit(R"("mode": "async", "steps": 100, "steps_in_flight": 1)");
  FakeWorker* w = workers_[0];
  ASSERT_TRUE(w->WaitForPending(1));
  ASSERT_TRUE(chief_->Cancel("").ok());
  const std::string first = chief_->Status().job_id();
  std::thread submit([this] { Submit(R"("mode": "async", "steps": 2, "steps_in_flight": 1)"); });
  absl::SleepFor(absl::Milliseconds(200));
  EXPECT_EQ(chief_->Status().job_id(), first);
  EXPECT_EQ(w->Finish(), 0);
  submit.join();
  JobStatus status = chief_->Status();
  EXPECT_NE(status.job_id(), first);
  EXPECT_EQ(status.state(), JobStatus::RUNNING);
  // A submission while it runs is refused.
  auto refused = chief_->Submit(R"({"name": "u", "model": "softmax", "steps": 2})");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  while (chief_->Status().steps_done() < 2) {
    ASSERT_TRUE(w->WaitForPending(1));
    EXPECT_GE(w->Finish(), 0);
  }
  ASSERT_TRUE(chief_->WaitForJobEnd(kWait));
  EXPECT_EQ(chief_->Status().state(), JobStatus::SUCCEEDED);
}

}  // namespace
}  // namespace shardps
