// PsClient against in-process ps tasks (ShardStore through LocalPsInterface): layout,
// chunking, row routing, idempotency keys and input validation, without a network.
#include "client/ps_client.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/local_ps_interface.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

class PsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (int i = 0; i < 3; ++i) {
      stores_.push_back(*ShardStore::Create({}));
      ps.push_back(NewLocalPsInterface("ps:" + std::to_string(i), stores_.back().get()));
    }
    PsClient::Options options;
    options.max_chunk_bytes = 256;  // many chunks
    client_ = *PsClient::Create(std::move(ps), options);
  }

  VariableDef Def(const std::string& name, std::vector<int64_t> shape) {
    VariableDef def;
    def.name = name;
    def.shape = std::move(shape);
    def.initializer.set_type(InitializerSpec::ZEROS);
    def.optimizer.set_type(OptimizerSpec::SGD);
    def.optimizer.set_learning_rate(1.0);
    return def;
  }

  std::vector<std::unique_ptr<ShardStore>> stores_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsClientTest, LayoutFollowsPartitionerAndRoundRobin) {
  auto partitioner = *NewFixedShardsPartitioner(2);
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(client_->CreateVariables({Def("a", {5, 3}), Def("b", {4}), Def("s", {})},
                                       *partitioner, placer.get())
                  .ok());
  VariableLayout a = *client_->GetLayout("a");
  ASSERT_EQ(a.shards.size(), 2u);
  EXPECT_EQ(a.shards[0].spec.name(), "a/part_0");
  EXPECT_EQ(a.shards[0].rows, 3);
  EXPECT_EQ(a.shards[1].row_offset, 3);
  EXPECT_EQ(a.shards[0].ps, 0);
  EXPECT_EQ(a.shards[1].ps, 1);
  VariableLayout b = *client_->GetLayout("b");
  EXPECT_EQ(b.shards[0].ps, 2);  // the counter continues across variables
  EXPECT_EQ(b.shards[1].ps, 0);
  VariableLayout s = *client_->GetLayout("s");
  EXPECT_EQ(s.num_elements, 1);
  EXPECT_EQ(s.shards.size(), 1u);

  // A client that did not create them rebuilds the same layout.
  std::vector<std::unique_ptr<PsInterface>> ps;
  for (int i = 0; i < 3; ++i) ps.push_back(NewLocalPsInterface("ps", stores_[i].get()));
  auto other = *PsClient::Create(std::move(ps), {});
  ASSERT_TRUE(other->Discover().ok());
  VariableLayout a2 = *other->GetLayout("a");
  EXPECT_EQ(a2.shards[1].ps, 1);
  EXPECT_EQ(a2.shape, a.shape);
  EXPECT_EQ(other->VariableNames().size(), 3u);
}

TEST_F(PsClientTest, ChunkedPushPullAndRows) {
  auto partitioner = *NewFixedShardsPartitioner(3);
  auto placer = *NewByBytesPlacer(3);
  ASSERT_TRUE(client_->CreateVariables({Def("w", {50, 7})}, *partitioner, placer.get()).ok());
  std::vector<float> values(350);
  for (int i = 0; i < 350; ++i) values[i] = i * 0.5f;
  ASSERT_TRUE(client_->Assign("w", values).ok());
  std::vector<float> grad(350, 1.0f);
  ASSERT_TRUE(client_->Push("w", grad).ok());
  std::vector<float> got(350);
  ASSERT_TRUE(client_->Pull("w", absl::MakeSpan(got)).ok());
  for (int i = 0; i < 350; ++i) ASSERT_FLOAT_EQ(got[i], values[i] - 1.0f) << i;

  std::vector<int64_t> ids = {49, 0, 17, 17};
  std::vector<float> rows(4 * 7);
  ASSERT_TRUE(client_->PullRows("w", ids, absl::MakeSpan(rows)).ok());
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_EQ(0, std::memcmp(&rows[k * 7], &got[ids[k] * 7], 28));
  }
}

TEST_F(PsClientTest, IdempotencyKeyAppliesAStepOnce) {
  auto partitioner = *NewFixedShardsPartitioner(2);
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(client_->CreateVariables({Def("v", {10, 4})}, *partitioner, placer.get()).ok());
  std::vector<float> grad(40, 1.0f);
  PushOptions options;
  options.idempotency_key = 777;
  ASSERT_TRUE(client_->Push("v", grad, options).ok());
  ASSERT_TRUE(client_->Push("v", grad, options).ok());  // a re-run of the same step
  options.idempotency_key = 778;
  ASSERT_TRUE(client_->Push("v", grad, options).ok());
  std::vector<float> got(40);
  PullVersions versions;
  ASSERT_TRUE(client_->Pull("v", absl::MakeSpan(got), {}, &versions).ok());
  EXPECT_EQ(versions.max_version, 2);
  for (float x : got) EXPECT_FLOAT_EQ(x, -2.0f);
}

TEST_F(PsClientTest, BadInputNamesVariable) {
  auto partitioner = *NewFixedShardsPartitioner(2);
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(client_->CreateVariables({Def("v", {10, 4})}, *partitioner, placer.get()).ok());
  std::vector<float> small(39);
  absl::Status s = client_->Push("v", small);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("\"v\""), std::string::npos) << s;
  s = client_->Pull("nope", absl::MakeSpan(small));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  std::vector<float> row(4);
  s = client_->PullRows("v", std::vector<int64_t>{-1}, absl::MakeSpan(row));
  EXPECT_NE(s.message().find("row id -1"), std::string::npos) << s;
  s = client_->CreateVariables({Def("bad", {3, 0})}, *partitioner, placer.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("bad"), std::string::npos) << s;
  EXPECT_FALSE(PsClient::Create({}, {}).ok());
}

TEST_F(PsClientTest, SyncPushesApplyOnceAllReplicasArrive) {
  auto partitioner = *NewFixedShardsPartitioner(2);
  auto placer = *NewRoundRobinPlacer(3);
  VariableDef def = Def("s", {6, 2});
  def.update.set_mode(UpdateSpec::SYNC);
  def.update.set_num_replicas(2);
  ASSERT_TRUE(client_->CreateVariables({def}, *partitioner, placer.get()).ok());
  std::vector<float> g0(12, 1.0f), g1(12, 2.0f), got(12);
  PushOptions r1;
  r1.has_sync = true;
  r1.sync.set_step(0);
  r1.sync.set_replica(1);
  ASSERT_TRUE(client_->Push("s", g1, r1).ok());
  PullVersions versions;
  ASSERT_TRUE(client_->Pull("s", absl::MakeSpan(got), {}, &versions).ok());
  EXPECT_EQ(versions.max_version, 0);
  PushOptions r0 = r1;
  r0.sync.set_replica(0);
  ASSERT_TRUE(client_->Push("s", g0, r0).ok());
  PullOptions wait;
  wait.min_version = 1;
  ASSERT_TRUE(client_->Pull("s", absl::MakeSpan(got), wait, &versions).ok());
  EXPECT_EQ(versions.min_version, 1);
  for (float x : got) EXPECT_FLOAT_EQ(x, -3.0f);
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// Request ids derived from an idempotency key must be the same in every process: a step
// re-run by another worker has to be recognised by the ps. Two clients in one process stand in
// for two processes here (each has its own random base for fresh ids).
TEST(PsClientIdempotencyTest, KeyedRequestIdsDoNotDependOnTheClient) {
  auto store = *ShardStore::Create({});
  auto make_client = [&] {
    std::vector<std::unique_ptr<PsInterface>> ps;
    ps.push_back(NewLocalPsInterface("ps:0", store.get()));
    return *PsClient::Create(std::move(ps), {});
  };
  auto a = make_client();
  auto b = make_client();
  VariableDef def;
  def.name = "v";
  def.shape = {4};
  def.optimizer.set_type(OptimizerSpec::SGD);
  def.optimizer.set_learning_rate(1.0);
  auto partitioner = *NewFixedShardsPartitioner(1);
  auto placer = *NewRoundRobinPlacer(1);
  ASSERT_TRUE(a->CreateVariables({def}, *partitioner, placer.get()).ok());
  ASSERT_TRUE(b->Discover().ok());
  std::vector<float> g(4, 1.0f);
  PushOptions options;
  options.idempotency_key = 99;
  ASSERT_TRUE(a->Push("v", g, options).ok());
  ASSERT_TRUE(b->Push("v", g, options).ok());
  std::vector<float> got(4);
  PullVersions versions;
  ASSERT_TRUE(a->Pull("v", absl::MakeSpan(got), {}, &versions).ok());
  EXPECT_EQ(versions.max_version, 1);
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// Delegates to an in-process ps, but completes each batch call on a thread of its own,
// counting how many of them were in flight at once. The first `wave` calls are held until
// `wave` calls are in flight together (or a second has passed), so the count does not depend
// on how fast threads start on a loaded machine; later calls complete after 2 ms.
class SlowBatches : public PsInterface {
 public:
  SlowBatches(std::unique_ptr<PsInterface> inner, int wave)
      : inner_(std::move(inner)), wave_(wave) {}
  ~SlowBatches() override {
    for (std::thread& t : threads_) t.join();
  }

  int max_in_flight() const { return max_in_flight_.load(); }
  int calls() const { return calls_.load(); }

  const std::string& name() const override { return inner_->name(); }
#define SHARDPS_DELEGATE(Method)                                                         \
  void Method##Async(const Method##Request* request, Method##Response* response,        \
                     absl::Time deadline, StatusCallback done) override {               \
    inner_->Method##Async(request, response, deadline, std::move(done));               \
  }
  SHARDPS_DELEGATE(CreateShards)
  SHARDPS_DELEGATE(ListShards)
  SHARDPS_DELEGATE(Pull)
  SHARDPS_DELEGATE(Push)
  SHARDPS_DELEGATE(PullRows)
  SHARDPS_DELEGATE(PushRows)
  SHARDPS_DELEGATE(Assign)
  SHARDPS_DELEGATE(Health)
  SHARDPS_DELEGATE(Shutdown)
#undef SHARDPS_DELEGATE

  void PullBatchAsync(const PullBatchRequest* request, PullBatchResponse* response,
                      absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                      StatusCallback done) override {
    std::vector<absl::Span<char>> copy(outs.begin(), outs.end());
    Later([=, done = std::move(done)]() mutable {
      inner_->PullBatchAsync(request, response, copy, deadline, Finish(std::move(done)));
    });
  }
  void PushBatchAsync(const PushBatchRequest* request,
                      absl::Span<const absl::Span<const char>> data,
                      PushBatchResponse* response, absl::Time deadline,
                      StatusCallback done) override {
    std::vector<absl::Span<const char>> copy(data.begin(), data.end());
    Later([=, done = std::move(done)]() mutable {
      inner_->PushBatchAsync(request, copy, response, deadline, Finish(std::move(done)));
    });
  }

 private:
  void Later(std::function<void()> fn) {
    const int now = in_flight_.fetch_add(1) + 1;
    const int index = calls_.fetch_add(1);
    int seen = max_in_flight_.load();
    while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
    }
    absl::MutexLock lock(&mu_);
    threads_.emplace_back([this, index, fn = std::move(fn)] {
      if (index < wave_) {
        absl::MutexLock wait(&mu_);
        auto full = [this] { return max_in_flight_.load() >= wave_; };
        mu_.AwaitWithTimeout(absl::Condition(&full), absl::Seconds(1));
      } else {
        absl::SleepFor(absl::Milliseconds(2));
      }
      fn();
    });
  }
  StatusCallback Finish(StatusCallback done) {
    return [this, done = std::move(done)](const absl::Status& s) {
      in_flight_.fetch_sub(1);
      done(s);
    };
  }

  std::unique_ptr<PsInterface> inner_;
  const int wave_;
  std::atomic<int> in_flight_{0}, max_in_flight_{0}, calls_{0};
  absl::Mutex mu_;
  std::vector<std::thread> threads_;
};

// A Pull or Push of many chunks keeps at most calls_in_flight_per_ps calls to a ps in flight
// (0: all at once), and still moves every byte.
TEST(PsClientWindowTest, CallsInFlightPerPsIsBounded) {
  for (int window : {1, 2, 0}) {
    auto store = *ShardStore::Create({});
    const int expected = window == 0 ? 8 : window;
    auto slow =
        std::make_unique<SlowBatches>(NewLocalPsInterface("ps:0", store.get()), expected);
    SlowBatches* probe = slow.get();
    std::vector<std::unique_ptr<PsInterface>> ps;
    ps.push_back(std::move(slow));
    PsClient::Options options;
    options.max_chunk_bytes = 4 * 16 * sizeof(float);  // 4 rows per call: 8 calls for 32 rows
    options.calls_in_flight_per_ps = window;
    auto client = *PsClient::Create(std::move(ps), options);
    VariableDef def;
    def.name = "w";
    def.shape = {32, 16};
    def.initializer.set_type(InitializerSpec::ZEROS);
    def.optimizer.set_type(OptimizerSpec::SGD);
    def.optimizer.set_learning_rate(1.0);
    auto placer = *NewRoundRobinPlacer(1);
    ASSERT_TRUE(client->CreateVariables({def}, **NewFixedShardsPartitioner(1), placer.get()).ok());

    std::vector<float> grad(32 * 16);
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = static_cast<float>(i);
    ASSERT_TRUE(client->Push("w", grad).ok());
    std::vector<float> got(grad.size(), 1.0f);
    ASSERT_TRUE(client->Pull("w", absl::MakeSpan(got)).ok());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], -grad[i]) << i;

    EXPECT_EQ(probe->calls(), 16) << "window " << window;  // 8 pushes, 8 pulls
    EXPECT_EQ(probe->max_in_flight(), expected) << "window " << window;
  }
}

}  // namespace
}  // namespace shardps
