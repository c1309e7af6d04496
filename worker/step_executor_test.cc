#include "worker/step_executor.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <iostream>
#include <cmath>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "client/intercepting_ps_interface.h"
#include "client/local_ps_interface.h"
#include "client/ps_client.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "ps_server/shard_store.h"
#include "data/idx_reader.h"

namespace shardps {
namespace {

constexpr int kNumPs = 2;
constexpr int kBatch = 64;

// Two in-process ps tasks; the "chief" creates variables on them the way coordinator/chief.cc
// does, and every worker connects to them through LocalPsInterface.
class StepExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override { StartPs(); }

  // Fresh ps tasks (and a chief client to them); executors connect to them at StartJob.
  // The old tasks are shut down but kept: a client a worker still holds fails against them
  // instead of touching freed memory.
  void StartPs() {
    for (auto& store : stores_) {
      store->Shutdown();
      retired_.push_back(std::move(store));
    }
    stores_.clear();
    for (int p = 0; p < kNumPs; ++p) {
      ShardStore::Options options;
      options.task_index = p;
      auto store = ShardStore::Create(options);
      ASSERT_TRUE(store.ok()) << store.status();
      stores_.push_back(*std::move(store));
    }
    auto chief = Connect({"ps0", "ps1"});
    ASSERT_TRUE(chief.ok()) << chief.status();
    chief_ = *std::move(chief);
  }

  void TearDown() override {
    for (auto& store : stores_) store->Shutdown();
  }

  // Every client's calls to ps p go through Intercept(p, ...) first.
  absl::StatusOr<std::unique_ptr<PsClient>> Connect(const std::vector<std::string>& addresses) {
    if (addresses.size() != stores_.size()) {
      return absl::InvalidArgumentError("test: expected one address per store");
    }
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (size_t p = 0; p < stores_.size(); ++p) {
      const int task = static_cast<int>(p);
      ps.push_back(std::make_unique<InterceptingPsInterface>(
          addresses[p], NewLocalPsInterface(addresses[p], stores_[p].get()),
          [this, task](absl::string_view method, const google::protobuf::Message& request,
                       google::protobuf::Message*, absl::Time) {
            return Intercept(task, method, request);
          }));
    }
    PsClient::Options options;
    options.initial_backoff = absl::Milliseconds(1);
    options.max_backoff = absl::Milliseconds(2);
    return PsClient::Create(std::move(ps), options);
  }

  using Interceptor = std::function<std::optional<absl::Status>(
      int ps, absl::string_view method, const google::protobuf::Message& request)>;
  void SetInterceptor(Interceptor interceptor) {
    absl::MutexLock lock(&intercept_mu_);
    interceptor_ = std::move(interceptor);
  }
  std::optional<absl::Status> Intercept(int ps, absl::string_view method,
                                        const google::protobuf::Message& request) {
    Interceptor interceptor;
    {
      absl::MutexLock lock(&intercept_mu_);
      interceptor = interceptor_;
    }
    if (!interceptor) return std::nullopt;
    return interceptor(ps, method, request);
  }

  std::unique_ptr<StepExecutor> NewExecutor(int task_index = 0,
                                            absl::Duration pull_wait = absl::Seconds(30)) {
    StepExecutor::Options options;
    options.task_index = task_index;
    options.backend_override = BackendKind::kCpu;
    options.num_threads = 2;
    options.pull_wait_timeout = pull_wait;
    options.connect = [this](const std::vector<std::string>& addresses) {
      ++connects_;
      return Connect(addresses);
    };
    auto executor = StepExecutor::Create(options);
    EXPECT_TRUE(executor.ok()) << executor.status();
    return executor.ok() ? *std::move(executor) : nullptr;
  }

  // A softmax model's variables for job `name`: kernel [784,10] glorot_uniform and bias [10]
  // zeros, SGD, split in two and placed round robin.
  void CreateVariables(const std::string& name, int sync_replicas = 0,
                       const std::string& partitioner_text = "fixed:2") {
    std::vector<VariableDef> defs(2);
    defs[0].name = name + "/dense_0/kernel";
    defs[0].shape = {784, 10};
    defs[0].initializer.set_type(InitializerSpec::GLOROT_UNIFORM);
    defs[0].initializer.set_seed(7);
    defs[1].name = name + "/dense_0/bias";
    defs[1].shape = {10};
    defs[1].initializer.set_type(InitializerSpec::ZEROS);
    for (VariableDef& def : defs) {
      def.optimizer.set_type(OptimizerSpec::SGD);
      def.optimizer.set_learning_rate(0.1);
      if (sync_replicas > 0) {
        def.update.set_mode(UpdateSpec::SYNC);
        def.update.set_num_replicas(sync_replicas);
      }
    }
    auto partitioner = ParsePartitioner(partitioner_text);
    ASSERT_TRUE(partitioner.ok()) << partitioner.status();
    auto placer = NewRoundRobinPlacer(kNumPs);
    ASSERT_TRUE(placer.ok()) << placer.status();
    ASSERT_TRUE(chief_->CreateVariables(defs, **partitioner, placer->get()).ok());
  }

  static StartJobRequest Start(const std::string& job_id, const std::string& name = "fm") {
    StartJobRequest request;
    JobSpec* job = request.mutable_job();
    job->set_job_id(job_id);
    job->set_name(name);
    job->set_model("softmax");
    job->set_dataset("fashion_mnist");
    job->set_data_dir(std::string(kDefaultFashionMnistDir));
    job->set_batch_size(kBatch);
    job->set_seed(42);
    job->mutable_optimizer()->set_type(OptimizerSpec::SGD);
    job->mutable_optimizer()->set_learning_rate(0.1);
    job->set_backend("cpu");
    request.add_ps_addresses("ps0");
    request.add_ps_addresses("ps1");
    return request;
  }

  static StepRequest Step(const std::string& job_id, int64_t step_id, int64_t batch_index) {
    StepRequest request;
    request.set_job_id(job_id);
    request.set_step_id(step_id);
    request.set_epoch(0);
    request.set_batch_index(batch_index);
    return request;
  }

  // The versions of the kernel's shards, read through the chief's client.
  PullVersions KernelVersions(const std::string& name) {
    std::vector<float> kernel(784 * 10);
    PullVersions versions;
    EXPECT_TRUE(chief_->Pull(name + "/dense_0/kernel", absl::MakeSpan(kernel), {}, &versions).ok());
    return versions;
  }

  // The kernel and bias values.
  std::vector<float> Values(const std::string& name) {
    std::vector<float> kernel(784 * 10);
    std::vector<float> bias(10);
    EXPECT_TRUE(chief_->Pull(name + "/dense_0/kernel", absl::MakeSpan(kernel)).ok());
    EXPECT_TRUE(chief_->Pull(name + "/dense_0/bias", absl::MakeSpan(bias)).ok());
    kernel.insert(kernel.end(), bias.begin(), bias.end());
    return kernel;
  }

  // One update of every shard, with zero gradients (SGD leaves the values as they are).
  void PushZeros(const std::string& name) {
    std::vector<float> kernel(784 * 10);
    std::vector<float> bias(10);
    ASSERT_TRUE(chief_->PushMany({{name + "/dense_0/kernel", absl::MakeConstSpan(kernel)},
                                  {name + "/dense_0/bias", absl::MakeConstSpan(bias)}})
                    .ok());
  }

  std::vector<std::unique_ptr<ShardStore>> stores_;
  std::vector<std::unique_ptr<ShardStore>> retired_;
  std::atomic<int> connects_{0};  // calls of the executors' connect function
  std::unique_ptr<PsClient> chief_;
  absl::Mutex intercept_mu_;
  Interceptor interceptor_ ABSL_GUARDED_BY(intercept_mu_);
};

TEST_F(StepExecutorTest, LossDecreasesOverThirtyStepsOfFashionMnist) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  auto started = worker->StartJob(Start("job-1"));
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_TRUE(absl::StartsWith(started->backend(), "cpu")) << started->backend();

  std::vector<double> losses;
  for (int i = 0; i < 30; ++i) {
    auto step = worker->RunStep(Step("job-1", i, i));
    ASSERT_TRUE(step.ok()) << step.status();
    EXPECT_EQ(step->examples(), kBatch);
    EXPECT_GE(step->correct(), 0);
    EXPECT_LE(step->correct(), kBatch);
    // Async, one worker: every earlier step has been applied once to every shard.
    EXPECT_EQ(step->version(), i);
    EXPECT_GE(step->pull_ms(), 0);
    EXPECT_GE(step->compute_ms(), 0);
    EXPECT_GE(step->push_ms(), 0);
    losses.push_back(step->loss());
  }
  double first = std::accumulate(losses.begin(), losses.begin() + 5, 0.0) / 5;
  double last = std::accumulate(losses.end() - 5, losses.end(), 0.0) / 5;
  EXPECT_GT(first, 1.5);  // about ln(10) from a random start
  EXPECT_LT(last, first - 0.4) << "first 5 steps " << first << ", last 5 steps " << last;

  WorkerStatusResponse status = worker->Status();
  EXPECT_EQ(status.job_id(), "job-1");
  EXPECT_EQ(status.steps_run(), 30);
  EXPECT_EQ(status.backend(), started->backend());
  EXPECT_EQ(KernelVersions("fm").min_version, 30);
}

TEST_F(StepExecutorTest, StartJobIsIdempotentForTheSameJobId) {
  CreateVariables("fm");
  auto worker = NewExecutor(3);
  ASSERT_NE(worker, nullptr);
  auto first = worker->StartJob(Start("job-1"));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(worker->RunStep(Step("job-1", 0, 0)).ok());
  auto again = worker->StartJob(Start("job-1"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->backend(), first->backend());
  WorkerStatusResponse status = worker->Status();
  EXPECT_EQ(status.task_index(), 3);
  EXPECT_EQ(status.steps_run(), 1);  // the job was not restarted
  EXPECT_EQ(connects_.load(), 1);
}

// A chief that restarted with another partitioner for the same job: the ps tasks (fresh here,
// the old ones still up) now hold the variables in one shard each. A worker that kept its
// old client and layout would go on with stale shards (here: the old tasks; on real ps, pulls
// failing as if a ps had lost its shards); the changed spec makes it start again.
TEST_F(StepExecutorTest, StartJobWithAChangedSpecRestartsTheJob) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  ASSERT_TRUE(worker->RunStep(Step("job-1", 0, 0)).ok());
  ASSERT_EQ(connects_.load(), 1);

  StartPs();
  CreateVariables("fm", 0, "fixed:1");
  StartJobRequest same = Start("job-1");
  ASSERT_TRUE(worker->StartJob(same).ok());
  EXPECT_EQ(connects_.load(), 1);  // identical: still the old layout, on the old tasks
  ASSERT_TRUE(worker->RunStep(Step("job-1", 1, 1)).ok());
  EXPECT_EQ(KernelVersions("fm").min_version, 0);  // nothing reached the new tasks

  StartJobRequest changed = Start("job-1");
  changed.mutable_job()->set_partitioner("fixed:1");
  auto restarted = worker->StartJob(changed);
  ASSERT_TRUE(restarted.ok()) << restarted.status();
  EXPECT_EQ(connects_.load(), 2);
  auto step = worker->RunStep(Step("job-1", 2, 2));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(KernelVersions("fm").min_version, 1);
  EXPECT_EQ(KernelVersions("fm").max_version, 1);
  EXPECT_EQ(worker->Status().job_id(), "job-1");
  EXPECT_EQ(worker->Status().steps_run(), 1);  // counted for the restarted job

  ASSERT_TRUE(worker->StartJob(changed).ok());  // the new spec again: idempotent
  EXPECT_EQ(connects_.load(), 2);
}

// Any difference counts: each of these starts job-1 afresh (one more connect), and the job
// then runs.
TEST_F(StepExecutorTest, AnyDifferenceInTheStartRestartsTheJob) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  std::vector<std::pair<std::string, std::function<void(StartJobRequest*)>>> changes = {
      {"batch_size", [](StartJobRequest* r) { r->mutable_job()->set_batch_size(kBatch / 2); }},
      {"optimizer.learning_rate",
       [](StartJobRequest* r) { r->mutable_job()->mutable_optimizer()->set_learning_rate(0.2); }},
      {"checkpoint.dir",
       [](StartJobRequest* r) { r->mutable_job()->mutable_checkpoint()->set_dir("/ckpt"); }},
      {"warm_start.variables", [](StartJobRequest* r) {
         (*r->mutable_job()->mutable_warm_start()->mutable_variables())["a"] = "b";
       }},
      {"ps_addresses order", [](StartJobRequest* r) {
         r->clear_ps_addresses();
         r->add_ps_addresses("ps1");
         r->add_ps_addresses("ps0");
       }},
  };
  int expected_connects = 1;
  for (auto& [what, change] : changes) {
    StartJobRequest request = Start("job-1");
    change(&request);
    ASSERT_TRUE(worker->StartJob(request).ok()) << what;
    EXPECT_EQ(connects_.load(), ++expected_connects) << what;
    ASSERT_TRUE(worker->StartJob(request).ok()) << what;
    EXPECT_EQ(connects_.load(), expected_connects) << what << " again";
    ASSERT_TRUE(worker->StartJob(Start("job-1")).ok()) << what;  // back to the first spec
    EXPECT_EQ(connects_.load(), ++expected_connects) << what << " undone";
  }
  EXPECT_TRUE(worker->RunStep(Step("job-1", 0, 0)).ok());
}

TEST_F(StepExecutorTest, UnknownJobIsFailedPrecondition) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  auto step = worker->RunStep(Step("job-1", 0, 0));
  EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DetailKind(step.status()), ErrorDetail::UNKNOWN_JOB) << step.status();
  EXPECT_TRUE(absl::StrContains(step.status().message(), "unknown job")) << step.status();

  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  step = worker->RunStep(Step("job-0", 0, 0));
  EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(DetailKind(step.status()), ErrorDetail::UNKNOWN_JOB) << step.status();
  EXPECT_TRUE(absl::StrContains(step.status().message(), "unknown job \"job-0\"")) << step.status();
}

// Raises every ps to `generation` where the store knows generations (a tree where it does not
// yet ignores them, and the steps below run the same).
void RaiseGeneration(PsClient* ps, int64_t generation) {
  absl::Status s = ps->SetGenerationAll(generation);
  if (s.code() != absl::StatusCode::kUnimplemented) {
    ASSERT_TRUE(s.ok()) << s;
  }
}

TEST_F(StepExecutorTest, PushesCarryTheGenerationWhichIsPartOfTheirRequestIds) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  absl::Mutex mu;
  std::vector<std::pair<uint64_t, int64_t>> pushed;  // (request id, generation) of each item
  SetInterceptor([&](int, absl::string_view method, const google::protobuf::Message& request) {
    if (method == "PushBatch") {
      absl::MutexLock lock(&mu);
      for (const PushRequest& item : static_cast<const PushBatchRequest&>(request).pushes()) {
        pushed.emplace_back(item.request_id(), item.generation());
      }
    }
    return std::optional<absl::Status>();
  });
  auto take = [&] {
    absl::MutexLock lock(&mu);
    std::vector<std::pair<uint64_t, int64_t>> taken;
    taken.swap(pushed);
    std::sort(taken.begin(), taken.end());
    return taken;
  };

  RaiseGeneration(chief_.get(), 3);
  StepRequest step = Step("job-1", 7, 3);
  step.set_generation(3);
  ASSERT_TRUE(worker->RunStep(step).ok());
  const auto first = take();
  ASSERT_EQ(first.size(), 4u);  // kernel and bias, two shards each
  for (const auto& [id, generation] : first) EXPECT_EQ(generation, 3);

  // The same step in the same generation (a lost reply): the same ids, not applied again.
  auto again = worker->RunStep(step);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(take(), first);
  EXPECT_EQ(KernelVersions("fm").max_version, 1);

  // After a rollback, the step re-run in the next generation is new to the ps.
  RaiseGeneration(chief_.get(), 4);
  step.set_generation(4);
  ASSERT_TRUE(worker->RunStep(step).ok());
  const auto rerun = take();
  ASSERT_EQ(rerun.size(), 4u);
  for (size_t i = 0; i < rerun.size(); ++i) {
    EXPECT_EQ(rerun[i].second, 4);
    for (const auto& old : first) EXPECT_NE(rerun[i].first, old.first);
  }
  SetInterceptor(nullptr);
  EXPECT_EQ(KernelVersions("fm").min_version, 2);
}

TEST_F(StepExecutorTest, StepErrorsKeepTheirDetail) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());

  // A ps at a later generation refuses the push.
  SetInterceptor([](int ps, absl::string_view method, const google::protobuf::Message&) {
    if (method != "PushBatch" || ps != 1) return std::optional<absl::Status>();
    ErrorDetail stale;
    stale.set_kind(ErrorDetail::STALE_GENERATION);
    stale.set_generation(9);
    return std::optional<absl::Status>(
        WithDetail(absl::AbortedError("generation 0 is below the ps's 9"), stale));
  });
  auto step = worker->RunStep(Step("job-1", 7, 3));
  EXPECT_EQ(step.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(DetailKind(step.status()), ErrorDetail::STALE_GENERATION) << step.status();
  EXPECT_TRUE(absl::StartsWith(step.status().message(), "step 7 (epoch 0, batch 3): push: ps1: "))
      << step.status();

  // A ps that cannot be reached: PS_UNAVAILABLE with its task, through the pull.
  SetInterceptor([](int ps, absl::string_view, const google::protobuf::Message&) {
    if (ps != 1) return std::optional<absl::Status>();
    return std::optional<absl::Status>(absl::UnavailableError("connection refused"));
  });
  step = worker->RunStep(Step("job-1", 8, 4));
  EXPECT_EQ(step.status().code(), absl::StatusCode::kUnavailable);
  std::optional<ErrorDetail> detail = GetDetail(step.status());
  ASSERT_TRUE(detail.has_value()) << step.status();
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(detail->ps_task(), 1);
  EXPECT_TRUE(absl::StartsWith(step.status().message(), "step 8 (epoch 0, batch 4): pull: ps1: "))
      << step.status();
  SetInterceptor(nullptr);
  EXPECT_EQ(worker->Status().steps_run(), 0);
}

TEST_F(StepExecutorTest, MissingDataDirIsFailedPreconditionNamingTheDir) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  StartJobRequest request = Start("job-1");
  request.mutable_job()->set_data_dir("/nonexistent/fashion-mnist");
  auto started = worker->StartJob(request);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(started.status().message(), "/nonexistent/fashion-mnist"))
      << started.status();
  // Nothing was started.
  EXPECT_EQ(worker->Status().job_id(), "");
}

// A job whose model the user's code computes is refused, saying so, and starts nothing.
TEST_F(StepExecutorTest, ExternalModelIsFailedPreconditionNamingWhoRunsIt) {
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  StartJobRequest request = Start("job-1");
  request.mutable_job()->set_model("external");
  request.mutable_job()->set_dataset("external");
  request.mutable_job()->set_examples_per_epoch(100);
  ExternalVariable* var = request.mutable_job()->add_variables();
  var->set_name("w");
  var->add_shape(2);
  auto started = worker->StartJob(request);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(started.status().message(), "shardps.Worker")) << started.status();
  EXPECT_EQ(worker->Status().job_id(), "");
}

TEST_F(StepExecutorTest, MissingVariableIsFailedPreconditionNamingIt) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  auto started = worker->StartJob(Start("job-1", "other"));
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(started.status().message(), "\"other/dense_0/kernel\""))
      << started.status();
  EXPECT_EQ(worker->Status().job_id(), "");
}

TEST_F(StepExecutorTest, WrongVariableShapeIsFailedPreconditionNamingIt) {
  CreateVariables("fm");  // softmax: kernel [784,10]
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  StartJobRequest request = Start("job-1");
  request.mutable_job()->set_model("mlp:32");
  auto started = worker->StartJob(request);
  EXPECT_EQ(started.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(started.status().message(), "\"fm/dense_0/kernel\""))
      << started.status();
  EXPECT_TRUE(absl::StrContains(started.status().message(), "[784,32]")) << started.status();
}

TEST_F(StepExecutorTest, BadRequestsAreRejected) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  StartJobRequest request = Start("job-1");
  request.mutable_job()->set_batch_size(0);
  EXPECT_EQ(worker->StartJob(request).status().code(), absl::StatusCode::kInvalidArgument);
  request = Start("job-1");
  request.mutable_job()->set_model("cnn");
  EXPECT_EQ(worker->StartJob(request).status().code(), absl::StatusCode::kInvalidArgument);
  request = Start("");
  EXPECT_EQ(worker->StartJob(request).status().code(), absl::StatusCode::kInvalidArgument);

  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  // 60000 / 64 rounds up to 938 batches per epoch.
  EXPECT_TRUE(worker->RunStep(Step("job-1", 0, 937)).ok());
  EXPECT_EQ(worker->RunStep(Step("job-1", 1, 938)).status().code(), absl::StatusCode::kOutOfRange);
}

TEST_F(StepExecutorTest, SyncStepIsAppliedOnlyAfterEveryReplicaPushed) {
  CreateVariables("fm", /*sync_replicas=*/2);
  auto worker0 = NewExecutor(0);
  auto worker1 = NewExecutor(1);
  ASSERT_NE(worker0, nullptr);
  ASSERT_NE(worker1, nullptr);
  ASSERT_TRUE(worker0->StartJob(Start("job-1")).ok());
  ASSERT_TRUE(worker1->StartJob(Start("job-1")).ok());

  // Sync step 0 is made of steps 0 and 1 (replicas 0 and 1), pulled at version 0.
  StepRequest r0 = Step("job-1", 0, 0);
  r0.set_sync(true);
  r0.set_sync_step(0);
  r0.set_replica(0);
  auto s0 = worker0->RunStep(r0);
  ASSERT_TRUE(s0.ok()) << s0.status();
  EXPECT_EQ(s0->version(), 0);
  EXPECT_EQ(KernelVersions("fm").max_version, 0);  // waits for replica 1

  StepRequest r1 = Step("job-1", 1, 1);
  r1.set_sync(true);
  r1.set_sync_step(0);
  r1.set_replica(1);
  auto s1 = worker1->RunStep(r1);
  ASSERT_TRUE(s1.ok()) << s1.status();
  EXPECT_EQ(s1->version(), 0);
  PullVersions versions = KernelVersions("fm");
  EXPECT_EQ(versions.min_version, 1);
  EXPECT_EQ(versions.max_version, 1);

  // Sync step 1 pulls at version 1.
  StepRequest r2 = Step("job-1", 2, 2);
  r2.set_sync(true);
  r2.set_sync_step(1);
  r2.set_replica(0);
  r2.set_min_version(1);
  auto s2 = worker0->RunStep(r2);
  ASSERT_TRUE(s2.ok()) << s2.status();
  EXPECT_EQ(s2->version(), 1);
}

TEST_F(StepExecutorTest, PullWaitsForMinVersionThenTimesOut) {
  CreateVariables("fm");
  auto worker = NewExecutor(0, absl::Milliseconds(200));
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  StepRequest request = Step("job-1", 0, 0);
  request.set_min_version(5);
  auto step = worker->RunStep(request);
  EXPECT_EQ(step.status().code(), absl::StatusCode::kDeadlineExceeded) << step.status();
  // The ps answered (its wait ran out): nothing says it is down.
  EXPECT_FALSE(GetDetail(step.status()).has_value()) << step.status();
  EXPECT_EQ(KernelVersions("fm").max_version, 0);  // nothing was pushed
  EXPECT_EQ(worker->Status().steps_run(), 0);
}

TEST_F(StepExecutorTest, AsyncStepRunTwiceIsAppliedOnce) {
  CreateVariables("fm");
  auto worker0 = NewExecutor(0);
  auto worker1 = NewExecutor(1);
  ASSERT_NE(worker0, nullptr);
  ASSERT_NE(worker1, nullptr);
  ASSERT_TRUE(worker0->StartJob(Start("job-1")).ok());
  ASSERT_TRUE(worker1->StartJob(Start("job-1")).ok());

  ASSERT_TRUE(worker0->RunStep(Step("job-1", 7, 3)).ok());
  EXPECT_EQ(KernelVersions("fm").min_version, 1);
  // The same step again, here and on another worker (as after a lost reply): not applied.
  auto again = worker0->RunStep(Step("job-1", 7, 3));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->version(), 1);
  ASSERT_TRUE(worker1->RunStep(Step("job-1", 7, 3)).ok());
  PullVersions versions = KernelVersions("fm");
  EXPECT_EQ(versions.min_version, 1);
  EXPECT_EQ(versions.max_version, 1);
  // Another step is applied.
  ASSERT_TRUE(worker0->RunStep(Step("job-1", 8, 4)).ok());
  EXPECT_EQ(KernelVersions("fm").min_version, 2);
}

// Two threads run steps on one worker at once (as with steps_in_flight 2): every step succeeds
// and is applied exactly once, and training still makes progress.
TEST_F(StepExecutorTest, ConcurrentStepsAreEachAppliedOnce) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  constexpr int kPerThread = 15;
  std::vector<double> losses[2];
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const int64_t step_id = 2 * i + t;
        auto step = worker->RunStep(Step("job-1", step_id, step_id));
        ASSERT_TRUE(step.ok()) << step.status();
        EXPECT_EQ(step->examples(), kBatch);
        EXPECT_GE(step->version(), 0);
        EXPECT_LT(step->version(), 2 * kPerThread);  // the threads do not keep in step
        EXPECT_GE(step->compute_ms(), 0);
        losses[t].push_back(step->loss());
      }
    });
  }
  for (std::thread& t : threads) t.join();
  PullVersions versions = KernelVersions("fm");
  EXPECT_EQ(versions.min_version, 2 * kPerThread);
  EXPECT_EQ(versions.max_version, 2 * kPerThread);
  EXPECT_EQ(worker->Status().steps_run(), 2 * kPerThread);
  ASSERT_EQ(losses[0].size(), static_cast<size_t>(kPerThread));
  double first = (losses[0][0] + losses[1][0] + losses[0][1] + losses[1][1]) / 4;
  double last = (losses[0][kPerThread - 1] + losses[1][kPerThread - 1] +
                 losses[0][kPerThread - 2] + losses[1][kPerThread - 2]) / 4;
  EXPECT_LT(last, first - 0.3) << "first steps " << first << ", last steps " << last;
}

// Two async steps of one worker whose pulls both end before either computes (as when the next
// step pulls while this one computes): the second to compute adds the first's update to what
// it pulled, so the parameters end bit for bit as two steps run one after the other. With
// apply_own_gradient off, the second computes without it and they do not.
TEST_F(StepExecutorTest, ASecondStepInFlightComputesWithTheFirstStepsUpdate) {
  struct Outcome {
    std::vector<float> values;
    StepResponse responses[2];
  };
  // Runs steps 0 and 1 at once, holding the pulls to ps 0 until both have arrived.
  auto run_overlapped = [&](JobSpec::OwnGradient own) -> Outcome {
    StartPs();
    CreateVariables("fm");
    auto worker = NewExecutor();
    StartJobRequest start = Start("job-1");
    start.mutable_job()->set_own_gradient(own);
    EXPECT_TRUE(worker->StartJob(start).ok());
    absl::Mutex mu;
    int arrived = 0;
    SetInterceptor([&](int ps, absl::string_view method, const google::protobuf::Message&) {
      if (ps == 0 && (method == "PullBatch" || method == "Pull")) {
        absl::MutexLock lock(&mu);
        ++arrived;
        auto both = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return arrived >= 2; };
        mu.Await(absl::Condition(&both));
      }
      return std::optional<absl::Status>();
    });
    Outcome outcome;
    std::thread other([&] {
      auto step = worker->RunStep(Step("job-1", 1, 1));
      ASSERT_TRUE(step.ok()) << step.status();
      outcome.responses[1] = *step;
    });
    auto step = worker->RunStep(Step("job-1", 0, 0));
    EXPECT_TRUE(step.ok()) << step.status();
    if (step.ok()) outcome.responses[0] = *step;
    other.join();
    SetInterceptor(nullptr);
    outcome.values = Values("fm");
    return outcome;
  };
  // Runs the two steps one after the other, `first` first.
  auto run_sequential = [&](int first) {
    StartPs();
    CreateVariables("fm");
    auto worker = NewExecutor();
    EXPECT_TRUE(worker->StartJob(Start("job-1")).ok());
    for (int k : {first, 1 - first}) {
      auto step = worker->RunStep(Step("job-1", k, k));
      EXPECT_TRUE(step.ok()) << step.status();
      EXPECT_FALSE(step->own_gradient_applied());
    }
    return Values("fm");
  };

  Outcome with = run_overlapped(JobSpec::OWN_GRADIENT_APPLY);
  ASSERT_EQ(with.responses[0].version(), 0);  // both computed on pulls of version 0
  ASSERT_EQ(with.responses[1].version(), 0);
  ASSERT_NE(with.responses[0].own_gradient_applied(), with.responses[1].own_gradient_applied())
      << "exactly the second step to compute adds the first's update";
  const int first = with.responses[0].own_gradient_applied() ? 1 : 0;
  // The two pushes may reach a shard in either order, and float addition is not associative:
  // equal up to rounding (a few ulps), where computing without the update differs by far more.
  auto max_diff = [](const std::vector<float>& x, const std::vector<float>& y) {
    EXPECT_EQ(x.size(), y.size());
    float d = 0;
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) d = std::max(d, std::abs(x[i] - y[i]));
    return d;
  };
  const std::vector<float> sequential = run_sequential(first);
  const float with_diff = max_diff(with.values, sequential);
  EXPECT_LE(with_diff, 1e-6f) << "the overlapped steps did not end where the sequential ones did";

  Outcome without = run_overlapped(JobSpec::OWN_GRADIENT_IGNORE);
  EXPECT_FALSE(without.responses[0].own_gradient_applied());
  EXPECT_FALSE(without.responses[1].own_gradient_applied());
  if (without.responses[0].version() == 0 && without.responses[1].version() == 0) {
    const float without_diff =
        std::min(max_diff(without.values, run_sequential(0)), max_diff(without.values, run_sequential(1)));
    EXPECT_GT(without_diff, 1e-4f) << "computing without the first step's update made no difference";
    std::cout << "largest difference from the sequential run: with the own update " << with_diff
              << ", without " << without_diff << "\n";
  }
}

// A step waiting in its pull does not hold up another step: the second runs, and its push
// releases the first. (With one step at a time, the first would time out.)
TEST_F(StepExecutorTest, SecondStepRunsWhileFirstWaitsForItsVersion) {
  CreateVariables("fm");
  auto worker = NewExecutor(0, absl::Seconds(10));
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  absl::StatusOr<StepResponse> first;
  std::thread waiting([&] {
    StepRequest request = Step("job-1", 1, 1);
    request.set_min_version(1);  // step 0's update
    first = worker->RunStep(request);
  });
  absl::SleepFor(absl::Milliseconds(200));
  auto second = worker->RunStep(Step("job-1", 0, 0));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->version(), 0);
  waiting.join();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->version(), 1);
  EXPECT_EQ(KernelVersions("fm").min_version, 2);
  EXPECT_EQ(worker->Status().steps_run(), 2);
}

// Two steps hold both slots (waiting for a version): a third waits for a slot, and runs once
// one frees.
TEST_F(StepExecutorTest, ThirdStepWaitsForAFreeSlot) {
  CreateVariables("fm");
  auto worker = NewExecutor(0, absl::Seconds(20));
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  std::atomic<int> done{0};
  std::atomic<bool> third_done{false};
  std::vector<std::thread> threads;
  for (int64_t step_id : {10, 11}) {
    threads.emplace_back([&, step_id] {
      StepRequest request = Step("job-1", step_id, step_id);
      request.set_min_version(2);
      auto step = worker->RunStep(request);
      EXPECT_TRUE(step.ok()) << step.status();
      if (step.ok()) {
        EXPECT_GE(step->version(), 2);
      }
      ++done;
    });
  }
  absl::SleepFor(absl::Milliseconds(300));  // both are waiting in their pulls
  threads.emplace_back([&] {
    auto step = worker->RunStep(Step("job-1", 12, 12));  // needs nothing
    EXPECT_TRUE(step.ok()) << step.status();
    third_done = true;
  });
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(third_done.load()) << "a third step ran while two held both slots";
  EXPECT_EQ(done.load(), 0);
  EXPECT_EQ(KernelVersions("fm").max_version, 0);

  PushZeros("fm");
  PushZeros("fm");  // version 2: the first two pull, compute and push; the third follows
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_TRUE(third_done.load());
  EXPECT_EQ(KernelVersions("fm").min_version, 5);
  EXPECT_EQ(worker->Status().steps_run(), 3);
}

// Two replicas of each sync step run at once on one worker give, to the last bit, the losses
// and parameters of running them one after another: each step computes from its own buffers.
TEST_F(StepExecutorTest, ConcurrentStepsUseTheirOwnBuffers) {
  constexpr int kSyncSteps = 6;
  auto sync_step = [](int64_t g, int replica) {
    StepRequest request = Step("job-1", 2 * g + replica, 2 * g + replica);
    request.set_sync(true);
    request.set_sync_step(g);
    request.set_replica(replica);
    request.set_min_version(g);
    return request;
  };
  std::vector<double> losses[2];
  std::vector<float> values[2];
  for (int run = 0; run < 2; ++run) {
    StartPs();
    CreateVariables("fm", /*sync_replicas=*/2);
    auto worker = NewExecutor();
    ASSERT_NE(worker, nullptr);
    ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
    losses[run].resize(2 * kSyncSteps);
    for (int64_t g = 0; g < kSyncSteps; ++g) {
      auto run_replica = [&, g](int replica) {
        auto step = worker->RunStep(sync_step(g, replica));
        ASSERT_TRUE(step.ok()) << step.status();
        EXPECT_EQ(step->version(), g);
        losses[run][2 * g + replica] = step->loss();
      };
      if (run == 0) {
        run_replica(0);
        run_replica(1);
      } else {
        std::thread other(run_replica, 1);
        run_replica(0);
        other.join();
      }
    }
    EXPECT_EQ(KernelVersions("fm").min_version, kSyncSteps);
    values[run] = Values("fm");
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_TRUE(values[0] == values[1]) << "concurrent replicas changed the parameters";
}

// A job replaced while its steps run: they finish on the old job's buffers and client.
TEST_F(StepExecutorTest, StartJobWhileStepsRunIsSafe) {
  CreateVariables("fm");
  CreateVariables("fm2");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        const int64_t step_id = 2 * i + t;
        auto step = worker->RunStep(Step("job-1", step_id, step_id));
        if (step.ok()) {
          ++ok;
        } else {
          // Once job-2 has replaced it, job-1's steps are refused.
          EXPECT_EQ(step.status().code(), absl::StatusCode::kFailedPrecondition) << step.status();
        }
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(30));
  ASSERT_TRUE(worker->StartJob(Start("job-2", "fm2")).ok());
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(KernelVersions("fm").min_version, ok.load());
  auto step = worker->RunStep(Step("job-2", 0, 0));
  ASSERT_TRUE(step.ok()) << step.status();
  EXPECT_EQ(KernelVersions("fm2").min_version, 1);
}

// Each push names the version of its shard that the step pulled (the ps' staleness policy
// needs it): 0 for shards pulled at version 0, then the version the step saw.
TEST_F(StepExecutorTest, PushesCarryTheVersionsTheStepPulled) {
  CreateVariables("fm");
  auto worker = NewExecutor();
  ASSERT_NE(worker, nullptr);
  ASSERT_TRUE(worker->StartJob(Start("job-1")).ok());
  absl::Mutex mu;
  std::vector<std::pair<std::string, int64_t>> pushed;  // (shard, base_version) of each item
  SetInterceptor([&](int, absl::string_view method, const google::protobuf::Message& request) {
    if (method == "PushBatch") {
      absl::MutexLock lock(&mu);
      for (const PushRequest& item : static_cast<const PushBatchRequest&>(request).pushes()) {
        pushed.emplace_back(item.shard(), item.base_version());
      }
    }
    return std::optional<absl::Status>();
  });
  for (int64_t step = 1; step <= 3; ++step) {
    ASSERT_TRUE(worker->RunStep(Step("job-1", step, step)).ok());
  }
  SetInterceptor(nullptr);
  absl::MutexLock lock(&mu);
  ASSERT_EQ(pushed.size(), 12u);  // 3 steps, kernel and bias, two shards each
  std::map<std::string, std::vector<int64_t>> bases;
  for (const auto& [shard, base] : pushed) bases[shard].push_back(base);
  ASSERT_EQ(bases.size(), 4u);
  for (const auto& [shard, seen] : bases) {
    EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2})) << shard;
  }
}

TEST(StepIdempotencyKeyTest, StableNonZeroAndDistinct) {
  EXPECT_EQ(StepIdempotencyKey("job-1", 7, 2), StepIdempotencyKey("job-1", 7, 2));
  EXPECT_NE(StepIdempotencyKey("job-1", 7, 2), 0u);
  EXPECT_NE(StepIdempotencyKey("job-1", 7, 2), StepIdempotencyKey("job-1", 8, 2));
  EXPECT_NE(StepIdempotencyKey("job-1", 7, 2), StepIdempotencyKey("job-2", 7, 2));
  EXPECT_NE(StepIdempotencyKey("job-1", 7, 2), StepIdempotencyKey("job-1", 7, 3));
  EXPECT_NE(StepIdempotencyKey("job-1", 7, 0), StepIdempotencyKey("job-1", 7, 1));
  EXPECT_NE(StepIdempotencyKey("", 0, 0), 0u);
  // A fixed value (FNV-1a, then SplitMix64's finalizer): the key must not change between
  // builds, or a step re-run by a worker of another build would be applied twice.
  EXPECT_EQ(StepIdempotencyKey("job-1", 7, 2), 0x4b5782d9fdfd3582ULL);
}

}  // namespace
}  // namespace shardps
