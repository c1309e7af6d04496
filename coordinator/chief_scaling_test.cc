// scale-ps in the chief, in-process: three real ShardStores of which a job starts on two
// (num_ps), fake workers the test answers, a real checkpoint directory. A scale up and down
// through a checkpoint cut, each refusal (nothing moves), a new ps that never answers, a move
// that fails on a ps (back to the old layout through a recovery), and a restarted chief that
// follows the journal's layout.
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/intercepting_ps_interface.h"
#include "client/ps_client.h"
#include "coordinator/chief.h"
#include "coordinator/fake_worker.h"
#include "coordinator/in_process_ps.h"
#include "coordinator/job_store.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"
#include "tests/wait.h"

namespace shardps {
namespace {

constexpr absl::Duration kWait = absl::Seconds(20);

std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/chief_scaling_", name);
  std::system(absl::StrCat("rm -rf '", dir, "'").c_str());
  return dir;
}

class ChiefScalingTest : public ::testing::Test {
 protected:
  void SetUp() override { StartPs(0); }

  void StartPs(int64_t memory_budget_bytes) {
    if (tasks_ != nullptr) tasks_->Shutdown();
    InProcessPs::Options options;
    options.num_tasks = 3;
    options.first_incarnation = 1000;
    options.intercept = true;
    options.client.max_attempts = 2;
    options.client.initial_backoff = absl::Milliseconds(5);
    options.store.memory_budget_bytes = memory_budget_bytes;
    tasks_ = *InProcessPs::Create(options);
  }

  void TearDown() override {
    KillChief();
    tasks_->Shutdown();
    if (other_ != nullptr) other_->Shutdown();
  }

  void StartChief(std::vector<std::string> tf_config_ps = {"ps0", "ps1", "ps2"}) {
    Chief::Options options;
    options.ps_addresses = tf_config_ps;
    options.connect_ps = [this](const std::vector<std::string>& names) {
      // "q<k>": the ps of another cluster (other_), when the test made one.
      return other_ != nullptr && !names.empty() && names[0][0] == 'q'
                 ? other_->Connect(names)
                 : tasks_->Connect(names);
    };
    // The TF_CONFIG client, as chief_main makes it.
    options_client_ = *options.connect_ps(tf_config_ps);
    options.ps = options_client_.get();
    options.scale_timeout = absl::Seconds(5);
    options.probe_interval = absl::Milliseconds(50);
    options.probe_interval_ps = absl::Milliseconds(20);
    options.ps_unreachable_after = absl::Milliseconds(200);
    workers_.clear();
    auto worker = std::make_unique<FakeWorker>("worker0");
    workers_.push_back(worker.get());
    options.workers.push_back(std::move(worker));
    chief_ = *Chief::Create(std::move(options));
  }

  // The chief "dies" (its calls in flight fail; it is destroyed).
  void KillChief() {
    for (FakeWorker* w : workers_) {
      while (w->Finish(absl::UnavailableError("the chief is gone")) >= 0) {
      }
    }
    chief_.reset();
  }

  std::string Job(const std::string& dir, int64_t steps) {
    return absl::StrCat(R"({"name": "t", "model": "mlp:8", "batch_size": 64, "backend": "cpu",)",
                        R"( "mode": "async", "steps": )", steps,
                        R"(, "partitioner": "fixed:ps", "num_ps": 2,)",
                        R"( "checkpoint": {"dir": ")", dir, R"(", "every_steps": 100000}})");
  }

  // The job's shards task k holds.
  int Shards(int k) {
    ListShardsRequest request;
    ListShardsResponse response;
    if (!tasks_->store(k)->ListShards(request, &response).ok()) return -1;
    int n = 0;
    for (const ShardInfo& s : response.shards()) n += absl::StartsWith(s.spec().name(), "t/");
    return n;
  }

  // Finishes worker 0's steps until `steps_done` are done.
  bool RunUntil(int64_t steps_done) {
    const absl::Time deadline = absl::Now() + kWait;
    while (chief_->Status().steps_done() < steps_done) {
      if (absl::Now() > deadline) return false;
      if (workers_[0]->WaitForPending(1)) workers_[0]->Finish();
    }
    return true;
  }

  // Scales, finishing steps meanwhile (the cut drains the steps below it).
  absl::StatusOr<ScalePsResponse> Scale(int num_ps, std::vector<std::string> addresses = {},
                                        int64_t timeout_ms = 0, bool live = false) {
    ScalePsRequest request;
    request.set_num_ps(num_ps);
    request.set_live(live);
    request.set_per_switch(4);
    for (const std::string& a : addresses) request.add_ps_addresses(a);
    request.set_timeout_ms(timeout_ms);
    absl::Notification done;
    absl::StatusOr<ScalePsResponse> outcome = absl::UnknownError("no answer");
    chief_->ScalePs(request, [&](absl::StatusOr<ScalePsResponse> r) {
      outcome = std::move(r);
      done.Notify();
    });
    const absl::Time deadline = absl::Now() + kWait;
    while (!done.WaitForNotificationWithTimeout(absl::Milliseconds(2))) {
      if (absl::Now() > deadline) return absl::DeadlineExceededError("the scale never ended");
      workers_[0]->Finish();
    }
    return outcome;
  }

  void FinishJob(int64_t steps) {
    ASSERT_TRUE(RunUntil(steps)) << chief_->Status().DebugString();
    ASSERT_TRUE(chief_->WaitForJobEnd(kWait)) << chief_->Status().DebugString();
    EXPECT_EQ(chief_->Status().state(), JobStatus::SUCCEEDED) << chief_->Status().DebugString();
  }

  std::unique_ptr<InProcessPs> tasks_;
  std::unique_ptr<InProcessPs> other_;  // another cluster's ps, "q0", "q1"
  std::shared_ptr<PsClient> options_client_;
  std::vector<FakeWorker*> workers_;
  std::unique_ptr<Chief> chief_;
};

TEST_F(ChiefScalingTest, AJobStartsOnNumPsAndScalesUpAndDownThroughACheckpoint) {
  const std::string dir = FreshDir("up_down");
  StartChief();
  absl::StatusOr<SubmitJobResponse> submitted = chief_->Submit(Job(dir, 80));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  // num_ps 2 of TF_CONFIG's 3: "fixed:ps" cuts each variable in 2.
  EXPECT_EQ(Shards(2), 0);
  const int on_two = Shards(0);
  EXPECT_GT(on_two, 0);
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 1);
  EXPECT_EQ(status.ps_size(), 2);
  ASSERT_TRUE(RunUntil(20));
  EXPECT_EQ(workers_[0]->last_start_ps(), (std::vector<std::string>{"ps0", "ps1"}));

  absl::StatusOr<ScalePsResponse> up = Scale(3);
  ASSERT_TRUE(up.ok()) << up.status() << "\n" << chief_->Status().DebugString();
  EXPECT_EQ(up->from_ps(), 2);
  EXPECT_EQ(up->to_ps(), 3);
  EXPECT_EQ(up->layout_version(), 2);
  EXPECT_GT(up->checkpoint_id(), 0);
  EXPECT_GE(up->steps_done(), 20);
  EXPECT_GT(up->bytes_moved(), 0);
  // Every ps holds a third of each variable now; the worker was started on the three.
  EXPECT_GT(Shards(2), 0);
  EXPECT_EQ(Shards(0), Shards(2));
  status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 2);
  EXPECT_EQ(status.ps_size(), 3);
  EXPECT_EQ(status.ps_scales(), 1);
  EXPECT_EQ(status.last_scale().to_ps(), 3);
  // Resumed at the cut (leasing goes on at once, so a step may already be done past it): no
  // step lost; none repeated is checked at the end (every step once).
  EXPECT_GE(status.steps_done(), up->steps_done());
  EXPECT_EQ(status.last_checkpoint().steps_done(), up->steps_done());
  ASSERT_TRUE(RunUntil(up->steps_done() + 10));
  EXPECT_EQ(workers_[0]->last_start_ps(), (std::vector<std::string>{"ps0", "ps1", "ps2"}));
  {
    // The journal holds the new layout: the truth for a restarted chief.
    JobStore::State state = *(*JobStore::Open(dir))->ReadState();
    EXPECT_EQ(state.layout_version, 2);
    EXPECT_EQ(state.ps_addresses, (std::vector<std::string>{"ps0", "ps1", "ps2"}));
  }

  // Down again: the highest ps goes, dropping the job's shards (and told to shut down).
  absl::StatusOr<ScalePsResponse> down = Scale(2);
  ASSERT_TRUE(down.ok()) << down.status() << "\n" << chief_->Status().DebugString();
  EXPECT_EQ(down->layout_version(), 3);
  EXPECT_EQ(Shards(2), 0);
  EXPECT_EQ(Shards(0), on_two);
  EXPECT_EQ(chief_->Status().ps_size(), 2);
  FinishJob(80);
  // Every step once: the final checkpoint is at the job's end.
  status = chief_->Status();
  EXPECT_EQ(status.steps_done(), 80);
  EXPECT_EQ(status.last_checkpoint().steps_done(), 80);
  EXPECT_EQ(status.ps_scales(), 2);
  EXPECT_EQ(status.ps_scales_failed(), 0);
  EXPECT_EQ(status.steps_lost(), 0);
}

TEST_F(ChiefScalingTest, RefusedScalesChangeNothing) {
  const std::string dir = FreshDir("refused");
  StartChief();
  ASSERT_TRUE(chief_->Submit(Job(dir, 400)).ok());
  ASSERT_TRUE(RunUntil(5));
  const int shards0 = Shards(0);
  struct Case {
    int num_ps;
    std::vector<std::string> addresses;
    absl::StatusCode code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {0, {}, absl::StatusCode::kInvalidArgument, "num_ps must be >= 1"},
      {2, {}, absl::StatusCode::kInvalidArgument, "already runs on 2 ps"},
      {4, {}, absl::StatusCode::kInvalidArgument, "ps 3 has no address"},
      {3, {"ps0", "ps2", "ps1"}, absl::StatusCode::kInvalidArgument, "keep their indices"},
      {3, {"ps0", "ps1"}, absl::StatusCode::kInvalidArgument, "names 2 ps for num_ps 3"},
      {3, {"ps0", "ps1", "ps1"}, absl::StatusCode::kInvalidArgument, "names a ps twice"},
      {3, {"ps0", "ps1", "nowhere"}, absl::StatusCode::kNotFound, "no ps task nowhere"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ScalePsResponse> r = Scale(c.num_ps, c.addresses);
    EXPECT_EQ(r.status().code(), c.code) << r.status();
    EXPECT_TRUE(absl::StrContains(r.status().message(), c.says)) << r.status();
  }
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 1);
  EXPECT_EQ(status.ps_size(), 2);
  EXPECT_EQ(status.phase(), "");
  EXPECT_EQ(Shards(0), shards0);
  EXPECT_EQ(Shards(2), 0);
  EXPECT_EQ(status.recoveries_size(), 0);
  EXPECT_FALSE(status.has_checkpoint()) << "a refused scale cuts no checkpoint";

  // A new ps that does not answer: refused at the timeout, before any cut.
  tasks_->Down(2);
  absl::StatusOr<ScalePsResponse> late = Scale(3, {}, /*timeout_ms=*/300);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded) << late.status();
  EXPECT_TRUE(absl::StrContains(late.status().message(), "ps 2 (ps2) did not answer"))
      << late.status();
  tasks_->Up(2);
  status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 1);
  EXPECT_FALSE(status.has_checkpoint());
  EXPECT_EQ(status.ps_scales_failed(), 2);  // "nowhere" was found out on the way too
  EXPECT_TRUE(absl::StrContains(status.last_scale().error(), "did not answer"));

  // A second scale while one runs (the first waits for its new ps).
  tasks_->Down(2);
  ScalePsRequest first;
  first.set_num_ps(3);
  first.set_timeout_ms(5000);
  absl::Notification first_done;
  chief_->ScalePs(first, [&](absl::StatusOr<ScalePsResponse>) { first_done.Notify(); });
  absl::StatusOr<ScalePsResponse> second = Scale(3);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition) << second.status();
  EXPECT_TRUE(absl::StrContains(second.status().message(), "already being scaled"))
      << second.status();
  tasks_->Up(2);
  while (!first_done.WaitForNotificationWithTimeout(absl::Milliseconds(2))) {
    workers_[0]->Finish();
  }
  EXPECT_EQ(chief_->Status().layout_version(), 2);
}

// While a ps of the job is unreachable (the job paused, a recovery may follow), a scale is
// refused; once it is back the same scale goes through.
TEST_F(ChiefScalingTest, AScaleDuringARecoveryIsRefused) {
  const std::string dir = FreshDir("recovering");
  StartChief();
  ASSERT_TRUE(chief_->Submit(Job(dir, 400)).ok());
  ASSERT_TRUE(RunUntil(5));
  tasks_->Down(1);
  ASSERT_TRUE(testing::PollUntil(
      [&] { return absl::StartsWith(chief_->Status().phase(), "paused"); }, absl::Now() + kWait,
      absl::Milliseconds(5)))
      << chief_->Status().DebugString();
  absl::StatusOr<ScalePsResponse> r = Scale(3);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "is recovering")) << r.status();
  EXPECT_EQ(chief_->Status().layout_version(), 1);
  EXPECT_FALSE(chief_->Status().has_checkpoint());
  tasks_->Up(1);
  ASSERT_TRUE(testing::PollUntil([&] { return chief_->Status().phase().empty(); },
                                 absl::Now() + kWait, absl::Milliseconds(5)));
  absl::StatusOr<ScalePsResponse> later = Scale(3);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_EQ(chief_->Status().layout_version(), 2);
}

// A dynamic table (an external model's [null, dim] variable) and a dense one with rows pushed
// before a scale: their values are the same after 2 -> 3 and after 3 -> 2 ps, the table's
// buckets re-split over the new count.
TEST_F(ChiefScalingTest, ADynamicTableKeepsEveryRowAcrossScales) {
  const std::string dir = FreshDir("dynamic");
  StartChief();
  const std::string job = absl::StrCat(
      R"({"name": "t", "model": "external", "dataset": "external", "examples_per_epoch": 6400,)",
      R"( "batch_size": 64, "mode": "async", "steps": 200, "seed": 3, "num_ps": 2,)",
      R"( "partitioner": "fixed:ps", "optimizer": {"type": "adagrad", "learning_rate": 0.5},)",
      R"( "dynamic_tables": {"num_buckets": 64},)",
      R"( "variables": [{"name": "tags", "shape": [null, 4]},)",
      R"(               {"name": "w", "shape": [12, 3]}],)",
      R"( "checkpoint": {"dir": ")", dir, R"(", "every_steps": 100000}})");
  absl::StatusOr<SubmitJobResponse> submitted = chief_->Submit(job);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(RunUntil(3));
  // Rows pushed by "a worker" of the job.
  std::shared_ptr<PsClient> two = *tasks_->Connect({"ps0", "ps1"});
  ASSERT_TRUE(two->Discover().ok());
  std::vector<int64_t> keys;
  for (int64_t k = 0; k < 300; ++k) keys.push_back(k * 7919 - 1000);
  std::vector<float> grads(keys.size() * 4);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
  ASSERT_TRUE(two->PushRows("t/tags", keys, grads).ok());
  ASSERT_TRUE(two->Push("t/w", std::vector<float>(36, 0.25f)).ok());
  std::vector<float> rows(keys.size() * 4), w(36);
  ASSERT_TRUE(two->PullRows("t/tags", keys, absl::MakeSpan(rows)).ok());
  ASSERT_TRUE(two->Pull("t/w", absl::MakeSpan(w)).ok());

  for (int n : {3, 2}) {
    SCOPED_TRACE(n);
    absl::StatusOr<ScalePsResponse> scaled = Scale(n);
    ASSERT_TRUE(scaled.ok()) << scaled.status();
    std::vector<std::string> names;
    for (int k = 0; k < n; ++k) names.push_back(absl::StrCat("ps", k));
    std::shared_ptr<PsClient> now = *tasks_->Connect(names);
    ASSERT_TRUE(now->Discover().ok());
    EXPECT_EQ(now->GetLayout("t/tags")->shards.size(), static_cast<size_t>(n));
    std::vector<float> rows_now(rows.size()), w_now(w.size());
    ASSERT_TRUE(now->PullRows("t/tags", keys, absl::MakeSpan(rows_now)).ok());
    ASSERT_TRUE(now->Pull("t/w", absl::MakeSpan(w_now)).ok());
    EXPECT_EQ(rows_now, rows);
    EXPECT_EQ(w_now, w);
  }
}

// A job with a dynamic table and a dense variable on 2 of the 3 ps, rows pushed, for the live
// scales.
class ChiefLiveScalingTest : public ChiefScalingTest {
 protected:
  void StartJob(const std::string& name) {
    dir_ = FreshDir(name);
    StartChief();
    const std::string job = absl::StrCat(
        R"({"name": "t", "model": "external", "dataset": "external", )",
        R"("examples_per_epoch": 6400, "batch_size": 64, "mode": "async", "steps": 200, )",
        R"("seed": 3, "num_ps": 2, "partitioner": "fixed:ps", )",
        R"("optimizer": {"type": "adagrad", "learning_rate": 0.5}, )",
        R"("dynamic_tables": {"num_buckets": 64}, )",
        R"("variables": [{"name": "tags", "shape": [null, 4]}, {"name": "w", "shape": [12, 3]}],)",
        R"( "checkpoint": {"dir": ")", dir_, R"(", "every_steps": 100000}})");
    ASSERT_TRUE(chief_->Submit(job).ok());
    ASSERT_TRUE(RunUntil(3));
    std::shared_ptr<PsClient> two = *tasks_->Connect({"ps0", "ps1"});
    ASSERT_TRUE(two->Discover().ok());
    for (int64_t k = 0; k < 300; ++k) keys_.push_back(k * 7919 - 1000);
    std::vector<float> grads(keys_.size() * 4);
    for (size_t i = 0; i < grads.size(); ++i) {
      grads[i] = 0.01f * static_cast<float>(i % 17) - 0.05f;
    }
    ASSERT_TRUE(two->PushRows("t/tags", keys_, grads).ok());
    ASSERT_TRUE(two->Push("t/w", std::vector<float>(36, 0.25f)).ok());
    rows_.resize(keys_.size() * 4);
    w_.resize(36);
    ASSERT_TRUE(two->PullRows("t/tags", keys_, absl::MakeSpan(rows_)).ok());
    ASSERT_TRUE(two->Pull("t/w", absl::MakeSpan(w_)).ok());
  }

  // The rows and the dense variable read through a client of the first `n` ps are those
  // pushed.
  void ExpectKept(int n) {
    std::vector<std::string> names;
    for (int k = 0; k < n; ++k) names.push_back(absl::StrCat("ps", k));
    std::shared_ptr<PsClient> now = *tasks_->Connect(names);
    ASSERT_TRUE(now->Discover().ok());
    std::vector<float> rows(rows_.size()), w(w_.size());
    ASSERT_TRUE(now->PullRows("t/tags", keys_, absl::MakeSpan(rows)).ok());
    ASSERT_TRUE(now->Pull("t/w", absl::MakeSpan(w)).ok());
    EXPECT_EQ(rows, rows_);
    EXPECT_EQ(w, w_);
    EXPECT_EQ(now->GetLayout("t/tags")->shards.size(), static_cast<size_t>(n));
    EXPECT_EQ(now->GetLayout("t/w")->shards.size(), 2u);
  }

  // scale-ps 3 --live from 2: the table gets a shard on ps 2 and its share of the buckets.
  void AddLive() {
    absl::StatusOr<ScalePsResponse> live = Scale(3, {}, 0, /*live=*/true);
    ASSERT_TRUE(live.ok()) << live.status() << "\n" << chief_->Status().DebugString();
    EXPECT_TRUE(live->live());
    EXPECT_EQ(live->to_ps(), 3);
    EXPECT_EQ(live->checkpoint_id(), 0);  // none
    EXPECT_EQ(live->tables(), 1);
    EXPECT_GE(live->buckets_moved(), 21);  // a third of 64, along the chain 0 -> 1 -> 2
    EXPECT_GT(live->rows_moved(), 0);
    EXPECT_EQ(Shards(2), 1);  // the table's shard only: the dense variable stays on ps 0 and 1
    std::shared_ptr<PsClient> three = *tasks_->Connect({"ps0", "ps1", "ps2"});
    ASSERT_TRUE(three->Discover().ok());
    const VariableLayout table = *three->GetLayout("t/tags");
    ASSERT_EQ(table.shards.size(), 3u);
    EXPECT_EQ(table.shards[2].ps, 2);
    EXPECT_GE(table.shards[2].buckets.end - table.shards[2].buckets.begin, 20);
    ExpectKept(3);
    ASSERT_TRUE(RunUntil(live->steps_done() + 5));
    EXPECT_EQ(workers_[0]->last_start_ps(), (std::vector<std::string>{"ps0", "ps1", "ps2"}));
    EXPECT_EQ(chief_->Status().ps_size(), 3);
    EXPECT_TRUE(chief_->Status().last_scale().live());
  }

  std::string dir_;
  std::vector<int64_t> keys_;
  std::vector<float> rows_, w_;
};

// scale-ps --live up and back down: the table gets a shard on the new ps and a third of its
// buckets, then gives them back, every row kept, without a checkpoint; the dense variable
// stays on its two ps; the worker is started again each time; the journal follows. Below the
// ps that hold the dense variable a live scale is refused.
TEST_F(ChiefLiveScalingTest, APsAddedLiveTakesItsShareOfTheTablesAndLeavesLive) {
  StartJob("live");
  AddLive();
  {
    JobStore::State state = *(*JobStore::Open(dir_))->ReadState();
    EXPECT_EQ(state.layout_version, 2);
    EXPECT_EQ(state.dense_ps, 2);
    EXPECT_EQ(state.ps_addresses, (std::vector<std::string>{"ps0", "ps1", "ps2"}));
  }
  absl::StatusOr<ScalePsResponse> down = Scale(2, {}, 0, /*live=*/true);
  ASSERT_TRUE(down.ok()) << down.status() << "\n" << chief_->Status().DebugString();
  EXPECT_EQ(down->to_ps(), 2);
  EXPECT_EQ(down->layout_version(), 3);
  EXPECT_GE(down->buckets_moved(), 20);
  EXPECT_EQ(Shards(2), 0);  // dropped
  ExpectKept(2);
  ASSERT_TRUE(RunUntil(down->steps_done() + 5));
  EXPECT_EQ(workers_[0]->last_start_ps(), (std::vector<std::string>{"ps0", "ps1"}));
  {
    JobStore::State state = *(*JobStore::Open(dir_))->ReadState();
    EXPECT_EQ(state.layout_version, 3);
    EXPECT_EQ(state.dense_ps, 0);
    EXPECT_EQ(state.ps_addresses, (std::vector<std::string>{"ps0", "ps1"}));
  }
  absl::StatusOr<ScalePsResponse> refused = Scale(1, {}, 0, /*live=*/true);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "has dense variables on ps 1"))
      << refused.status();
  EXPECT_EQ(chief_->Status().layout_version(), 3);
  FinishJob(200);
}

// A new ps that does not make the shard as asked (here: it answers CreateShards without
// making it, as a ps of a release that ignores start_version would make it at version 0):
// the live add is given up before the switch, the job runs on as it was, and a later live
// add goes through.
TEST_F(ChiefLiveScalingTest, ALiveAddANewPsDoesNotTakeIsGivenUpBeforeTheSwitch) {
  StartJob("live_refused");
  tasks_->SetConnectedHook(
      2, [](absl::string_view method, const google::protobuf::Message&,
            google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
        if (method == "CreateShards") return absl::OkStatus();
        return std::nullopt;
      });
  absl::StatusOr<ScalePsResponse> refused = Scale(3, {}, 0, /*live=*/true);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition)
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "did not make the shard"))
      << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "runs on as it was, on 2 ps"))
      << refused.status();
  tasks_->SetConnectedHook(2, nullptr);
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 1);
  EXPECT_EQ(status.ps_size(), 2);
  EXPECT_EQ(status.ps_scales_failed(), 1);
  EXPECT_EQ(Shards(2), 0);
  ExpectKept(2);
  ASSERT_TRUE(RunUntil(status.steps_done() + 5));
  AddLive();
  FinishJob(200);
}

// A scale down through a checkpoint after a live add re-shards the live layout (the table on
// three ps, the dense variable on two) onto two, every row kept.
TEST_F(ChiefLiveScalingTest, ACheckpointScaleAfterALiveAddReShardsEverything) {
  StartJob("live_then_checkpoint");
  AddLive();
  absl::StatusOr<ScalePsResponse> down = Scale(2);
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_GT(down->checkpoint_id(), 0);
  EXPECT_EQ(Shards(2), 0);
  ExpectKept(2);
  FinishJob(200);
}

TEST_F(ChiefScalingTest, ALiveScaleOfAJobWithoutDynamicTablesIsRefused) {
  StartChief();
  ASSERT_TRUE(chief_->Submit(Job(FreshDir("live_dense"), 80)).ok());
  ASSERT_TRUE(RunUntil(5));
  absl::StatusOr<ScalePsResponse> refused = Scale(3, {}, 0, /*live=*/true);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "has none")) << refused.status();
  EXPECT_EQ(Shards(2), 0);
  EXPECT_EQ(chief_->Status().layout_version(), 1);
  FinishJob(80);
}

TEST_F(ChiefScalingTest, ShardsThatDoNotFitAreRefusedNamingTheBytes) {
  // Budgets that hold the model (77 KB of Adam parameters and slots) on two ps but not on
  // one: each ps may allocate half its budget (the snapshot reserve).
  StartPs(/*memory_budget_bytes=*/100000);
  const std::string dir = FreshDir("budget");
  StartChief();
  absl::StatusOr<SubmitJobResponse> submitted = chief_->Submit(Job(dir, 400));
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  ASSERT_TRUE(RunUntil(5));
  absl::StatusOr<ScalePsResponse> r = Scale(1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "bytes of parameters and optimizer slots"))
      << r.status();
  EXPECT_EQ(chief_->Status().layout_version(), 1);
  EXPECT_EQ(chief_->Status().ps_size(), 2);
}

TEST_F(ChiefScalingTest, AMoveThatFailsOnAPsGoesBackToTheOldLayout) {
  const std::string dir = FreshDir("failed_move");
  StartChief();
  ASSERT_TRUE(chief_->Submit(Job(dir, 60)).ok());
  ASSERT_TRUE(RunUntil(15));
  // ps 2 answers its health but fails the restore (it dies mid-move).
  tasks_->SetConnectedHook(
      2, [](absl::string_view method, const google::protobuf::Message&,
            google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
        if (method == "Restore") return absl::InternalError("ps 2 crashed mid-restore");
        return std::nullopt;
      });
  absl::StatusOr<ScalePsResponse> r = Scale(3);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
  EXPECT_TRUE(absl::StrContains(r.status().message(), "back on 2 ps")) << r.status();
  tasks_->SetConnectedHook(2, nullptr);
  // The recovery rolls the old ps back to the scale's cut; the job goes on on them.
  ASSERT_TRUE(testing::PollUntil([&] { return chief_->Status().recoveries_size() == 1; },
                                 absl::Now() + kWait, absl::Milliseconds(5)))
      << chief_->Status().DebugString();
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 1);
  EXPECT_EQ(status.ps_size(), 2);
  EXPECT_EQ(status.steps_lost(), 0) << "rolled back to the cut it had just taken";
  EXPECT_EQ(Shards(2), 0) << "the failed move's shards on ps 2 are dropped";
  {
    JobStore::State state = *(*JobStore::Open(dir))->ReadState();
    EXPECT_EQ(state.ps_addresses, (std::vector<std::string>{"ps0", "ps1"}));
  }
  FinishJob(60);
  EXPECT_EQ(workers_[0]->last_start_ps(), (std::vector<std::string>{"ps0", "ps1"}));
}

// A chief that dies once the journal names the new layout (mid-move) is followed by one that
// resumes on that layout, from the scale's cut; one whose TF_CONFIG lacks a ps of it refuses
// the job, naming the ps.
TEST_F(ChiefScalingTest, ARestartedChiefFollowsTheJournalsLayout) {
  const std::string dir = FreshDir("journal");
  StartChief();
  ASSERT_TRUE(chief_->Submit(Job(dir, 60)).ok());
  ASSERT_TRUE(RunUntil(10));
  ASSERT_TRUE(Scale(3).ok());
  ASSERT_TRUE(RunUntil(chief_->Status().steps_done() + 5));
  KillChief();

  // TF_CONFIG without ps 2: a clear error, and nothing changes on the ps.
  StartChief({"ps0", "ps1"});
  absl::StatusOr<SubmitJobResponse> refused = chief_->Submit(Job(dir, 60));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "lacks \"ps2\"")) << refused.status();
  EXPECT_GT(Shards(2), 0);
  KillChief();

  StartChief();
  absl::StatusOr<SubmitJobResponse> resumed = chief_->Submit(Job(dir, 60));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(absl::StrContains(resumed->resumed_from(), "live")) << resumed->resumed_from();
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 2);
  EXPECT_EQ(status.ps_size(), 3);
  FinishJob(60);
  EXPECT_EQ(workers_[0]->last_start_ps(), (std::vector<std::string>{"ps0", "ps1", "ps2"}));
}

// A scaled job whose chief restarts with a TF_CONFIG naming none of its ps (the job moved to
// another cluster) is re-sharded onto those ps from its newest checkpoint.
TEST_F(ChiefScalingTest, AScaledJobRestartedOnAnotherClusterIsReShardedOntoIt) {
  const std::string dir = FreshDir("moved");
  StartChief();
  ASSERT_TRUE(chief_->Submit(Job(dir, 60)).ok());
  ASSERT_TRUE(RunUntil(10));
  absl::StatusOr<ScalePsResponse> up = Scale(3);
  ASSERT_TRUE(up.ok()) << up.status();
  KillChief();

  InProcessPs::Options options;
  options.num_tasks = 2;
  options.name_prefix = "q";
  other_ = *InProcessPs::Create(options);
  StartChief({"q0", "q1"});
  absl::StatusOr<SubmitJobResponse> resumed = chief_->Submit(Job(dir, 60));
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_TRUE(absl::StrContains(resumed->resumed_from(), "checkpoint")) << resumed->resumed_from();
  EXPECT_EQ(resumed->resumed_at_step(), up->steps_done());
  JobStatus status = chief_->Status();
  EXPECT_EQ(status.layout_version(), 3) << "a third layout";
  ASSERT_EQ(status.ps_size(), 2);
  EXPECT_EQ(status.ps(0).address(), "q0");
  FinishJob(60);
}

}  // namespace
}  // namespace shardps
