// PsClient against in-process ps tasks (ShardStore through LocalPsInterface): layout,
// chunking, row routing, idempotency keys and input validation, without a network.
#include "client/ps_client.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/intercepting_ps_interface.h"
#include "client/local_ps_interface.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

// A row request's ids, whichever field carries them (PsClient sends ids_bytes).
template <typename Request>
std::vector<int64_t> IdsOf(const Request& r) {
  std::vector<int64_t> ids(r.ids().begin(), r.ids().end());
  const size_t n = r.ids_bytes().size() / sizeof(int64_t);
  ids.resize(ids.size() + n);
  if (n > 0) std::memcpy(ids.data() + ids.size() - n, r.ids_bytes().data(), n * sizeof(int64_t));
  return ids;
}

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
  std::vector<std::unique_ptr<PsInterface>> one;
  one.push_back(NewLocalPsInterface("ps:0", stores_[0].get()));
  PsClient::Options no_restore_time;
  no_restore_time.restore_timeout = absl::ZeroDuration();
  auto refused = PsClient::Create(std::move(one), no_restore_time);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("restore_timeout"), std::string::npos)
      << refused.status();
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
  SHARDPS_DELEGATE(SetGeneration)
  SHARDPS_DELEGATE(DropShards)
  SHARDPS_DELEGATE(Snapshot)
  SHARDPS_DELEGATE(HoldPushes)
  SHARDPS_DELEGATE(MoveBuckets)
  SHARDPS_DELEGATE(SnapshotStatus)
  SHARDPS_DELEGATE(Restore)
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

namespace shardps {
namespace {

// Three in-process ps tasks, each behind an InterceptingPsInterface so that a test can fail,
// answer or watch any call to it. Their names are what NewGrpcPsClient gives real ones.
class PsClientCallsTest : public ::testing::Test {
 protected:
  void Start(PsClient::Options options) {
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (int i = 0; i < 3; ++i) {
      ShardStore::Options store_options;
      store_options.task_index = i;
      stores_.push_back(*ShardStore::Create(store_options));
      auto intercepting = std::make_unique<InterceptingPsInterface>(
          absl::StrCat("ps:", i, " (127.0.0.1:", 2222 + i, ")"),
          NewLocalPsInterface("local", stores_.back().get()));
      ps_.push_back(intercepting.get());
      ps.push_back(std::move(intercepting));
    }
    options.initial_backoff = absl::Milliseconds(1);
    options.max_backoff = absl::Milliseconds(2);
    client_ = *PsClient::Create(std::move(ps), options);
  }

  // `name` of shape `shape` in `parts` shards placed round robin (part k on ps k).
  void Create(const std::string& name, std::vector<int64_t> shape, int parts,
              OptimizerSpec::Type optimizer = OptimizerSpec::SGD, int sync_replicas = 0) {
    VariableDef def;
    def.name = name;
    def.shape = std::move(shape);
    def.initializer.set_type(InitializerSpec::ZEROS);
    def.optimizer.set_type(optimizer);
    def.optimizer.set_learning_rate(0.5);
    if (sync_replicas > 0) {
      def.update.set_mode(UpdateSpec::SYNC);
      def.update.set_num_replicas(sync_replicas);
    }
    auto placer = *NewRoundRobinPlacer(3);
    ASSERT_TRUE(
        client_->CreateVariables({def}, **NewFixedShardsPartitioner(parts), placer.get()).ok());
  }

  std::vector<std::unique_ptr<ShardStore>> stores_;  // outlive the client
  std::vector<InterceptingPsInterface*> ps_;         // owned by the client
  std::unique_ptr<PsClient> client_;
};

void ExpectPsDetail(const absl::Status& s, ErrorDetail::Kind kind, int ps_task) {
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value()) << s;
  EXPECT_EQ(detail->kind(), kind) << s;
  EXPECT_EQ(detail->ps_task(), ps_task) << s;
  EXPECT_TRUE(absl::StartsWith(s.message(), absl::StrCat("ps:", ps_task, " (127.0.0.1:",
                                                          2222 + ps_task, "): ")))
      << s;
}

TEST_F(PsClientCallsTest, EveryUpdateCarriesTheGeneration) {
  Start({});
  Create("w", {6, 4}, 3);
  ASSERT_TRUE(client_->SetGenerationAll(7).ok());  // a ps refuses updates from the future
  absl::Mutex mu;
  std::vector<int64_t> generations;
  for (InterceptingPsInterface* ps : ps_) {
    ps->SetInterceptor([&](absl::string_view method, const google::protobuf::Message& request,
                           google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
      absl::MutexLock lock(&mu);
      if (method == "PushBatch") {
        for (const PushRequest& item : static_cast<const PushBatchRequest&>(request).pushes()) {
          generations.push_back(item.generation());
        }
      } else if (method == "PushRows") {
        generations.push_back(static_cast<const PushRowsRequest&>(request).generation());
      }
      return std::nullopt;
    });
  }
  PushOptions options;
  options.generation = 7;
  std::vector<float> grad(24, 1.0f);
  ASSERT_TRUE(client_->Push("w", grad, options).ok());
  std::vector<float> rows(8, 1.0f);
  ASSERT_TRUE(client_->PushRows("w", std::vector<int64_t>{0, 5}, rows, options).ok());
  absl::MutexLock lock(&mu);
  EXPECT_EQ(generations, (std::vector<int64_t>(3 + 2, 7)));
}

// A pull reports each shard's version, and a push given those versions sends each shard its
// own as base_version (dense chunks and row requests alike); shards the pull did not read
// get 0.
TEST_F(PsClientCallsTest, PushesCarryEachShardsPulledVersionAsBaseVersion) {
  PsClient::Options options;
  options.max_chunk_bytes = 16;  // one row of 4 floats a chunk: several chunks per shard
  Start(options);
  Create("w", {6, 4}, 3);
  Create("other", {3}, 1);
  // Shard p (rows [2p, 2p + 2)) at version p + 1.
  for (int64_t p = 0; p < 3; ++p) {
    for (int64_t k = 0; k <= p; ++k) {
      ASSERT_TRUE(
          client_->PushRows("w", std::vector<int64_t>{2 * p}, std::vector<float>(4, 0.0f)).ok());
    }
  }
  PullVersions versions;
  std::vector<float> w(24);
  ASSERT_TRUE(client_->Pull("w", absl::MakeSpan(w), {}, &versions).ok());
  const std::map<std::string, int64_t> want = {{"w/part_0", 1}, {"w/part_1", 2}, {"w/part_2", 3}};
  EXPECT_EQ(versions.shards, want);
  EXPECT_EQ(versions.min_version, 1);
  EXPECT_EQ(versions.max_version, 3);
  PullVersions row_versions;
  std::vector<float> rows(8);
  ASSERT_TRUE(
      client_->PullRows("w", std::vector<int64_t>{5, 0}, absl::MakeSpan(rows), {}, &row_versions)
          .ok());
  EXPECT_EQ(row_versions.shards,
            (std::map<std::string, int64_t>{{"w/part_0", 1}, {"w/part_2", 3}}));

  absl::Mutex mu;
  std::vector<std::pair<std::string, int64_t>> sent;  // (shard, base_version) per request
  for (InterceptingPsInterface* ps : ps_) {
    ps->SetInterceptor([&](absl::string_view method, const google::protobuf::Message& request,
                           google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
      absl::MutexLock lock(&mu);
      if (method == "PushBatch") {
        for (const PushRequest& item : static_cast<const PushBatchRequest&>(request).pushes()) {
          sent.emplace_back(item.shard(), item.base_version());
        }
      } else if (method == "PushRows") {
        const auto& rows_request = static_cast<const PushRowsRequest&>(request);
        sent.emplace_back(rows_request.shard(), rows_request.base_version());
      }
      return std::nullopt;
    });
  }
  PushOptions push;
  push.base_versions = &versions;
  ASSERT_TRUE(client_->PushMany({{"w", std::vector<float>(24, 0.0f)},
                                 {"other", std::vector<float>(3, 0.0f)}},
                                push)
                  .ok());
  ASSERT_TRUE(
      client_->PushRows("w", std::vector<int64_t>{3, 4}, std::vector<float>(8, 0.0f), push).ok());
  absl::MutexLock lock(&mu);
  std::map<std::string, std::multiset<int64_t>> by_shard;
  for (const auto& [shard, base] : sent) by_shard[shard].insert(base);
  EXPECT_EQ(by_shard["w/part_0"], (std::multiset<int64_t>{1, 1}));  // two row chunks
  EXPECT_EQ(by_shard["w/part_1"], (std::multiset<int64_t>{2, 2, 2}));  // and a row push
  EXPECT_EQ(by_shard["w/part_2"], (std::multiset<int64_t>{3, 3, 3}));
  EXPECT_EQ(by_shard["other"], (std::multiset<int64_t>{0}));  // not pulled: unknown
}

TEST_F(PsClientCallsTest, UnreachablePsIsPsUnavailableAfterTheRetries) {
  PsClient::Options options;
  options.max_attempts = 3;
  Start(options);
  Create("w", {6, 4}, 3);
  std::atomic<int> attempts{0};
  ps_[1]->SetInterceptor([&](absl::string_view, const google::protobuf::Message&,
                             google::protobuf::Message*, absl::Time) {
    ++attempts;
    return std::optional<absl::Status>(absl::UnavailableError("connection refused"));
  });
  std::vector<float> values(24);
  absl::Status s = client_->Pull("w", absl::MakeSpan(values));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  ExpectPsDetail(s, ErrorDetail::PS_UNAVAILABLE, 1);
  EXPECT_EQ(attempts.load(), 3);
  // Through the join of a push's parts on three ps, and of a row pull's.
  s = client_->Push("w", values);
  ExpectPsDetail(s, ErrorDetail::PS_UNAVAILABLE, 1);
  std::vector<float> rows(12);
  s = client_->PullRows("w", std::vector<int64_t>{0, 2, 5}, absl::MakeSpan(rows));
  ExpectPsDetail(s, ErrorDetail::PS_UNAVAILABLE, 1);
  // Ps 0 alone still answers.
  EXPECT_TRUE(client_->PullRows("w", std::vector<int64_t>{0}, absl::MakeSpan(rows).first(4)).ok());
}

TEST_F(PsClientCallsTest, DeadlineExceededIsPsUnavailableOnlyWhenTheDeadlinePassed) {
  PsClient::Options options;
  options.rpc_timeout = absl::Milliseconds(100);
  Start(options);
  Create("w", {6, 4}, 3);
  std::atomic<bool> wait_for_deadline{true};
  ps_[2]->SetInterceptor([&](absl::string_view method, const google::protobuf::Message&,
                             google::protobuf::Message*,
                             absl::Time deadline) -> std::optional<absl::Status> {
    if (method != "PullBatch") return std::nullopt;
    if (wait_for_deadline) absl::SleepFor(deadline - absl::Now());  // as a hung ps would
    return absl::DeadlineExceededError("deadline exceeded");
  });
  std::vector<float> values(24);
  absl::Status s = client_->Pull("w", absl::MakeSpan(values));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  ExpectPsDetail(s, ErrorDetail::PS_UNAVAILABLE, 2);
  // The ps's own DEADLINE_EXCEEDED (a version wait that ran out) says nothing of its health.
  wait_for_deadline = false;
  s = client_->Pull("w", absl::MakeSpan(values));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_FALSE(GetDetail(s).has_value()) << s;
}

TEST_F(PsClientCallsTest, APsThatLostItsShardsIsPsStateLost) {
  Start({});
  Create("w", {6, 4}, 3);
  // Ps 1 restarts with nothing.
  ShardStore::Options restarted;
  restarted.task_index = 1;
  stores_.push_back(*ShardStore::Create(restarted));
  ps_[1]->SetInner(NewLocalPsInterface("local", stores_.back().get()));

  std::vector<float> values(24);
  std::vector<float> rows(8);
  const std::vector<int64_t> ids = {2, 3};  // part 1 holds rows 2 and 3
  for (absl::Status s :
       {client_->Pull("w", absl::MakeSpan(values)), client_->Push("w", values),
        client_->Assign("w", values), client_->PullRows("w", ids, absl::MakeSpan(rows)),
        client_->PushRows("w", ids, rows)}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
    ExpectPsDetail(s, ErrorDetail::PS_STATE_LOST, 1);
  }
  // A variable this client does not know is no ps's doing.
  absl::Status unknown = client_->Pull("nope", absl::MakeSpan(values));
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(GetDetail(unknown).has_value()) << unknown;
}

TEST_F(PsClientCallsTest, RowCallsAreSplitIntoBoundedRequests) {
  constexpr int kWidth = 4;
  PsClient::Options options;
  options.max_chunk_bytes = 3 * kWidth * sizeof(float);  // 3 rows a request
  Start(options);
  Create("e", {20, kWidth}, 1, OptimizerSpec::ADAGRAD);
  // The same variable through one unbounded request, for reference.
  auto reference_store = *ShardStore::Create({});
  std::vector<std::unique_ptr<PsInterface>> one;
  one.push_back(NewLocalPsInterface("ref", reference_store.get()));
  auto reference = *PsClient::Create(std::move(one), {});
  {
    VariableDef def;
    def.name = "e";
    def.shape = {20, kWidth};
    def.initializer.set_type(InitializerSpec::ZEROS);
    def.optimizer.set_type(OptimizerSpec::ADAGRAD);
    def.optimizer.set_learning_rate(0.5);
    auto placer = *NewRoundRobinPlacer(1);
    ASSERT_TRUE(
        reference->CreateVariables({def}, **NewFixedShardsPartitioner(1), placer.get()).ok());
  }

  absl::Mutex mu;
  std::vector<std::vector<int64_t>> pulled, pushed;  // each request's ids
  ps_[0]->SetInterceptor([&](absl::string_view method, const google::protobuf::Message& request,
                             google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
    absl::MutexLock lock(&mu);
    if (method == "PullRows") {
      const auto& r = static_cast<const PullRowsRequest&>(request);
      pulled.push_back(IdsOf(r));
    } else if (method == "PushRows") {
      const auto& r = static_cast<const PushRowsRequest&>(request);
      pushed.push_back(IdsOf(r));
    }
    return std::nullopt;
  });

  // Duplicates, spread out: Adagrad gives another result if a row's gradients are applied in
  // two updates instead of summed into one.
  const std::vector<int64_t> ids = {3, 7, 3, 19, 0, 7, 3, 12, 5, 5, 8, 0, 1};
  std::vector<float> grads(ids.size() * kWidth);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  ASSERT_TRUE(client_->PushRows("e", ids, grads).ok());
  ASSERT_TRUE(reference->PushRows("e", ids, grads).ok());
  std::vector<float> got(20 * kWidth), want(20 * kWidth);
  ASSERT_TRUE(client_->Pull("e", absl::MakeSpan(got)).ok());
  ASSERT_TRUE(reference->Pull("e", absl::MakeSpan(want)).ok());
  EXPECT_TRUE(got == want) << "a split push changed the update";

  std::vector<float> rows(ids.size() * kWidth);
  ASSERT_TRUE(client_->PullRows("e", ids, absl::MakeSpan(rows)).ok());
  for (size_t k = 0; k < ids.size(); ++k) {
    EXPECT_EQ(0, std::memcmp(&rows[k * kWidth], &got[ids[k] * kWidth], kWidth * sizeof(float)))
        << "row " << k;
  }

  absl::MutexLock lock(&mu);
  EXPECT_EQ(pulled.size(), 5u);  // 13 ids, 3 a request
  for (const auto& r : pulled) EXPECT_LE(r.size(), 3u);
  EXPECT_GT(pushed.size(), 1u);
  std::map<int64_t, size_t> request_of;
  size_t total = 0;
  for (size_t i = 0; i < pushed.size(); ++i) {
    EXPECT_LE(pushed[i].size(), 3u);
    total += pushed[i].size();
    for (int64_t id : pushed[i]) {
      auto [it, added] = request_of.emplace(id, i);
      EXPECT_EQ(it->second, i) << "id " << id << " went out in two requests";
    }
  }
  // The client sums an id's gradients: each distinct id goes out once.
  EXPECT_EQ(total, std::set<int64_t>(ids.begin(), ids.end()).size());
}

// A ps that bounds its replies (ShardStore::Options::max_reply_bytes) serves a row pull
// many times that large: the client's chunks stay under the bound.
TEST(PsClientReplyBoundTest, RowPullsStayWithinThePsReplyBound) {
  ShardStore::Options store_options;
  store_options.max_reply_bytes = 1024;
  auto store = *ShardStore::Create(store_options);
  std::vector<std::unique_ptr<PsInterface>> ps;
  ps.push_back(NewLocalPsInterface("ps:0", store.get()));
  PsClient::Options options;
  options.max_chunk_bytes = 1024;
  auto client = *PsClient::Create(std::move(ps), options);
  VariableDef def;
  def.name = "e";
  def.shape = {100, 16};
  def.initializer.set_type(InitializerSpec::RANDOM_NORMAL);
  def.optimizer.set_type(OptimizerSpec::SGD);
  def.optimizer.set_learning_rate(1.0);
  auto placer = *NewRoundRobinPlacer(1);
  ASSERT_TRUE(client->CreateVariables({def}, **NewFixedShardsPartitioner(1), placer.get()).ok());
  std::vector<float> all(100 * 16);
  ASSERT_TRUE(client->Pull("e", absl::MakeSpan(all)).ok());
  std::vector<int64_t> ids;
  for (int i = 0; i < 300; ++i) ids.push_back((i * 37) % 100);  // 19200 bytes of rows
  std::vector<float> rows(ids.size() * 16);
  ASSERT_TRUE(client->PullRows("e", ids, absl::MakeSpan(rows)).ok());
  for (size_t k = 0; k < ids.size(); ++k) {
    ASSERT_EQ(0, std::memcmp(&rows[k * 16], &all[ids[k] * 16], 16 * sizeof(float))) << k;
  }
  store->Shutdown();
}

TEST_F(PsClientCallsTest, SplitRowPushesKeepTheirRequestIdsOnARerun) {
  PsClient::Options options;
  options.max_chunk_bytes = 2 * 4 * sizeof(float);  // 2 rows a request
  Start(options);
  Create("e", {10, 4}, 1);
  absl::Mutex mu;
  std::vector<uint64_t> request_ids;
  ps_[0]->SetInterceptor([&](absl::string_view method, const google::protobuf::Message& request,
                             google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
    if (method == "PushRows") {
      absl::MutexLock lock(&mu);
      request_ids.push_back(static_cast<const PushRowsRequest&>(request).request_id());
    }
    return std::nullopt;
  });
  const std::vector<int64_t> ids = {1, 2, 3, 4, 5, 6, 7};
  std::vector<float> grads(ids.size() * 4, 1.0f);
  PushOptions push;
  push.idempotency_key = 12345;
  ASSERT_TRUE(client_->PushRows("e", ids, grads, push).ok());
  std::vector<uint64_t> first;
  {
    absl::MutexLock lock(&mu);
    first.swap(request_ids);
  }
  ASSERT_EQ(first.size(), 4u);
  EXPECT_EQ(std::set<uint64_t>(first.begin(), first.end()).size(), 4u);
  ASSERT_TRUE(client_->PushRows("e", ids, grads, push).ok());  // the step re-run
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(request_ids, first);
  }
  // Each request was applied once: four updates, not eight; rows pushed once.
  std::vector<float> values(40);
  PullVersions versions;
  ASSERT_TRUE(client_->Pull("e", absl::MakeSpan(values), {}, &versions).ok());
  EXPECT_EQ(versions.max_version, 4);
  EXPECT_FLOAT_EQ(values[4], -0.5f);
}

TEST_F(PsClientCallsTest, SyncRowPushSendsEachShardItsWholeShareEvenEmpty) {
  PsClient::Options options;
  options.max_chunk_bytes = 2 * 4 * sizeof(float);  // would split a non-sync push
  Start(options);
  Create("s", {10, 4}, 2, OptimizerSpec::SGD, /*sync_replicas=*/1);
  absl::Mutex mu;
  std::map<std::string, std::vector<int>> sizes;  // shard -> each request's ids
  for (InterceptingPsInterface* ps : ps_) {
    ps->SetInterceptor([&](absl::string_view method, const google::protobuf::Message& request,
                           google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
      if (method == "PushRows") {
        const auto& r = static_cast<const PushRowsRequest&>(request);
        absl::MutexLock lock(&mu);
        sizes[r.shard()].push_back(static_cast<int>(IdsOf(r).size()));
      }
      return std::nullopt;
    });
  }
  const std::vector<int64_t> ids = {0, 1, 2, 3, 4};  // all in part 0 (rows 0-4)
  std::vector<float> grads(ids.size() * 4, 1.0f);
  PushOptions push;
  push.has_sync = true;
  push.sync.set_step(0);
  push.sync.set_replica(0);
  ASSERT_TRUE(client_->PushRows("s", ids, grads, push).ok());
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(sizes["s/part_0"], (std::vector<int>{5}));
    EXPECT_EQ(sizes["s/part_1"], (std::vector<int>{0}));
  }
  // Both shards completed step 0.
  std::vector<float> values(40);
  PullVersions versions;
  ASSERT_TRUE(client_->Pull("s", absl::MakeSpan(values), {}, &versions).ok());
  EXPECT_EQ(versions.min_version, 1);
  EXPECT_FLOAT_EQ(values[0], -0.5f);
  EXPECT_FLOAT_EQ(values[39], 0.0f);
}

// A dynamic table: one shard per ps holding a run of buckets; keys (any int64) go to the
// shard holding their bucket, as keys, whole variable calls are refused naming the table.
// The stores are not reached: the interceptor records and answers each call.
TEST_F(PsClientCallsTest, DynamicTableKeysGoToTheShardHoldingTheirBucket) {
  Start({});
  absl::Mutex mu;
  std::vector<ShardSpec> created;
  std::map<std::string, std::vector<int64_t>> pushed;  // shard -> keys
  for (InterceptingPsInterface* ps : ps_) {
    ps->SetInterceptor([&](absl::string_view method, const google::protobuf::Message& request,
                           google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
      absl::MutexLock lock(&mu);
      if (method == "CreateShards") {
        for (const ShardSpec& spec : static_cast<const CreateShardsRequest&>(request).shards()) {
          created.push_back(spec);
        }
        return absl::OkStatus();
      }
      if (method == "PushRows") {
        const auto& r = static_cast<const PushRowsRequest&>(request);
        for (int64_t key : IdsOf(r)) pushed[r.shard()].push_back(key);
        return absl::OkStatus();
      }
      return std::nullopt;
    });
  }
  VariableDef def;
  def.name = "emb";
  def.shape = {0, 4};
  def.initializer.set_type(InitializerSpec::RANDOM_UNIFORM);
  def.optimizer.set_type(OptimizerSpec::ADAGRAD);
  def.optimizer.set_learning_rate(0.1);
  def.dynamic = DynamicTableDef{};
  def.dynamic->num_buckets = 100;
  def.dynamic->max_rows = 1000;
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(client_->CreateVariables({def}, **NewFixedShardsPartitioner(1), placer.get()).ok());
  EXPECT_EQ(placer->DebugString(), (*NewRoundRobinPlacer(3))->DebugString())
      << "a dynamic table does not advance the placer";

  VariableLayout layout = *client_->GetLayout("emb");
  EXPECT_TRUE(layout.dynamic);
  EXPECT_EQ(layout.row_width, 4);
  EXPECT_EQ(layout.num_buckets, 100);
  ASSERT_EQ(layout.shards.size(), 3u);
  ASSERT_EQ(created.size(), 3u);
  int32_t next = 0;
  int64_t budget = 0;
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(layout.shards[p].ps, p);
    EXPECT_EQ(layout.shards[p].buckets.begin, next);
    next = layout.shards[p].buckets.end;
    const ShardSpec& spec = layout.shards[p].spec;
    EXPECT_EQ(spec.name(), absl::StrCat("emb/part_", p));
    EXPECT_EQ(spec.dynamic().bucket_begin(), layout.shards[p].buckets.begin);
    EXPECT_EQ(spec.dynamic().bucket_end(), layout.shards[p].buckets.end);
    EXPECT_EQ(spec.shape().dim(0), 0);
    budget += spec.dynamic().max_rows();
  }
  EXPECT_EQ(next, 100);
  EXPECT_GE(budget, 1000);  // the table's budget, split by buckets and rounded up
  EXPECT_LT(budget, 1003);

  std::vector<int64_t> keys = {-7, INT64_MAX, 123456789012345, 0, -7, INT64_MIN};
  for (int64_t k = 0; k < 200; ++k) keys.push_back(k * 7919 - 1000);
  std::vector<float> grads(keys.size() * 4, 1.0f);
  ASSERT_TRUE(client_->PushRows("emb", keys, grads).ok());
  std::set<int64_t> seen;
  for (const auto& [shard, got] : pushed) {
    const VariableLayout::Shard* holder = nullptr;
    for (const auto& s : layout.shards) {
      if (s.spec.name() == shard) holder = &s;
    }
    ASSERT_NE(holder, nullptr) << shard;
    for (int64_t key : got) {
      EXPECT_TRUE(holder->buckets.Contains(BucketOf(key, 100))) << key << " on " << shard;
      EXPECT_TRUE(seen.insert(key).second) << key << " sent twice (duplicates are summed)";
    }
  }
  EXPECT_EQ(seen, std::set<int64_t>(keys.begin(), keys.end()));
  EXPECT_EQ(pushed.size(), 3u);

  std::vector<float> whole(4);
  const absl::Status pull = client_->Pull("emb", absl::MakeSpan(whole));
  EXPECT_EQ(pull.code(), absl::StatusCode::kInvalidArgument) << pull;
  EXPECT_TRUE(absl::StrContains(pull.message(), "\"emb\" is a dynamic table")) << pull;

  VariableDef bad = def;
  bad.name = "bad";
  bad.shape = {10, 4};
  const absl::Status refused =
      client_->CreateVariables({bad}, **NewFixedShardsPartitioner(1), placer.get());
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "shape must be [0, dim]")) << refused;
}

TEST_F(PsClientCallsTest, DropShardsAllForgetsTheLayouts) {
  Start({});
  Create("a", {6, 4}, 3);
  Create("b", {6, 4}, 3);
  std::vector<std::vector<std::string>> dropped(3);
  for (int p = 0; p < 3; ++p) {
    // The store's DropShards may not exist yet here: answer for it.
    ps_[p]->SetInterceptor([&dropped, p](absl::string_view method,
                                         const google::protobuf::Message& request,
                                         google::protobuf::Message* response,
                                         absl::Time) -> std::optional<absl::Status> {
      if (method != "DropShards") return std::nullopt;
      const auto& r = static_cast<const DropShardsRequest&>(request);
      dropped[p].assign(r.variables().begin(), r.variables().end());
      static_cast<DropShardsResponse*>(response)->set_dropped(r.variables_size());
      return absl::OkStatus();
    });
  }
  DropShardsRequest request;
  request.add_variables("a");
  ASSERT_TRUE(client_->DropShardsAll(request).ok());
  for (int p = 0; p < 3; ++p) EXPECT_EQ(dropped[p], (std::vector<std::string>{"a"}));
  EXPECT_EQ(client_->GetLayout("a").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(client_->GetLayout("b").ok());
  request.Clear();
  request.set_all(true);
  ASSERT_TRUE(client_->DropShardsAll(request).ok());
  EXPECT_TRUE(client_->VariableNames().empty());
}

TEST_F(PsClientCallsTest, LocalControlCallsReachTheStore) {
  Start({});
  absl::Status s = client_->SetGenerationAll(3);
  if (s.code() == absl::StatusCode::kUnimplemented) {
    GTEST_SKIP() << "ShardStore::SetGeneration is not implemented in this tree: " << s;
  }
  ASSERT_TRUE(s.ok()) << s;
  std::vector<absl::Status> statuses;
  std::vector<HealthResponse> health;
  client_->HealthEach(true, absl::Seconds(10), &statuses, &health);
  for (int p = 0; p < 3; ++p) {
    EXPECT_TRUE(statuses[p].ok()) << statuses[p];
    EXPECT_EQ(health[p].generation(), 3);
    EXPECT_EQ(health[p].task_index(), p);
  }
}

// The control plane against scripted ps tasks (no store behind them): every ps gets the
// request, each answer lands in its place, the first failure names its ps and keeps the
// detail the ps attached.
class PsClientControlTest : public ::testing::Test {
 protected:
  struct Seen {
    std::string method;
    std::string request;  // text format
    absl::Time deadline;
  };

  void SetUp() override {
    std::vector<std::unique_ptr<PsInterface>> ps;
    for (int p = 0; p < 3; ++p) {
      ps.push_back(std::make_unique<InterceptingPsInterface>(
          absl::StrCat("ps:", p, " (127.0.0.1:", 2222 + p, ")"), nullptr,
          [this, p](absl::string_view method, const google::protobuf::Message& request,
                    google::protobuf::Message* response, absl::Time deadline) {
            return Answer(p, method, request, response, deadline);
          }));
    }
    options_.rpc_timeout = absl::Minutes(1);
    options_.restore_timeout = absl::Hours(1);
    options_.initial_backoff = absl::Milliseconds(1);
    options_.max_backoff = absl::Milliseconds(2);
    client_ = *PsClient::Create(std::move(ps), options_);
  }

  std::optional<absl::Status> Answer(int p, absl::string_view method,
                                     const google::protobuf::Message& request,
                                     google::protobuf::Message* response, absl::Time deadline) {
    {
      absl::MutexLock lock(&mu_);
      seen_[p].push_back(Seen{std::string(method), request.ShortDebugString(), deadline});
      auto failure = failures_.find({p, std::string(method)});
      if (failure != failures_.end()) return failure->second;
    }
    if (method == "SetGeneration") {
      static_cast<SetGenerationResponse*>(response)->set_generation(
          static_cast<const SetGenerationRequest&>(request).generation());
    } else if (method == "Snapshot") {
      static_cast<SnapshotResponse*>(response)->add_shards()->mutable_spec()->set_name(
          absl::StrCat("v/part_", p));
    } else if (method == "SnapshotStatus") {
      static_cast<SnapshotStatusResponse*>(response)->set_state(SnapshotStatusResponse::DONE);
      static_cast<SnapshotStatusResponse*>(response)->set_bytes_written(1000 + p);
    } else if (method == "Restore") {
      static_cast<RestoreResponse*>(response)->set_bytes_read(100 * (p + 1));
    } else if (method == "Health") {
      static_cast<HealthResponse*>(response)->set_task_index(p);
      static_cast<HealthResponse*>(response)->set_incarnation(77 + p);
    }
    return absl::OkStatus();
  }

  void Fail(int p, const std::string& method, absl::Status status) {
    absl::MutexLock lock(&mu_);
    failures_[{p, method}] = std::move(status);
  }

  std::vector<Seen> SeenBy(int p) {
    absl::MutexLock lock(&mu_);
    return seen_[p];
  }

  PsClient::Options options_;
  absl::Mutex mu_;
  std::map<int, std::vector<Seen>> seen_ ABSL_GUARDED_BY(mu_);
  std::map<std::pair<int, std::string>, absl::Status> failures_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsClientControlTest, SetGenerationSnapshotAndStatusReachEveryPs) {
  ASSERT_TRUE(client_->SetGenerationAll(5).ok());
  std::vector<SnapshotResponse> snapshots;
  ASSERT_TRUE(client_->SnapshotAll(9, {"/ck/9/ps0.st", "/ck/9/ps1.st", "/ck/9/ps2.st"}, 5,
                                   &snapshots)
                  .ok());
  std::vector<SnapshotStatusResponse> statuses;
  ASSERT_TRUE(client_->SnapshotStatusAll(9, &statuses).ok());
  ASSERT_EQ(snapshots.size(), 3u);
  ASSERT_EQ(statuses.size(), 3u);
  for (int p = 0; p < 3; ++p) {
    std::vector<Seen> seen = SeenBy(p);
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[0].method, "SetGeneration");
    EXPECT_EQ(seen[0].request, "generation: 5");
    EXPECT_EQ(seen[1].method, "Snapshot");
    EXPECT_EQ(seen[1].request,
              absl::StrCat("checkpoint_id: 9 path: \"/ck/9/ps", p, ".st\" generation: 5"));
    EXPECT_EQ(seen[2].request, "checkpoint_id: 9");
    EXPECT_LE(seen[1].deadline, absl::Now() + options_.rpc_timeout);
    EXPECT_EQ(snapshots[p].shards(0).spec().name(), absl::StrCat("v/part_", p));
    EXPECT_EQ(statuses[p].state(), SnapshotStatusResponse::DONE);
    EXPECT_EQ(statuses[p].bytes_written(), 1000 + p);
  }
  // One path per ps, or nothing is sent.
  absl::Status s = client_->SnapshotAll(10, {"/a", "/b"}, 5, &snapshots);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(SeenBy(0).size(), 3u);
}

TEST_F(PsClientControlTest, RestoreGoesToEveryPsWithTheRestoreTimeout) {
  RestoreRequest request;
  request.set_generation(6);
  request.set_manifest("/ck/9/manifest.json");
  std::vector<RestoreResponse> responses;
  ASSERT_TRUE(client_->RestoreAll(request, &responses).ok());
  for (int p = 0; p < 3; ++p) {
    std::vector<Seen> seen = SeenBy(p);
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0].request, request.ShortDebugString());
    // Well past rpc_timeout: a restore of GiBs has the time it needs.
    EXPECT_GT(seen[0].deadline, absl::Now() + absl::Minutes(30));
    EXPECT_EQ(responses[p].bytes_read(), 100 * (p + 1));
  }
}

TEST_F(PsClientControlTest, TheFirstFailureNamesItsPsAndKeepsItsDetail) {
  ErrorDetail corrupt;
  corrupt.set_kind(ErrorDetail::CHECKPOINT_CORRUPT);
  corrupt.set_file("ps2.safetensors");
  Fail(2, "Restore", WithDetail(absl::DataLossError("crc32c mismatch"), corrupt));
  std::vector<RestoreResponse> responses;
  absl::Status s = client_->RestoreAll(RestoreRequest(), &responses);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), "ps:2 (127.0.0.1:2224): crc32c mismatch");
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::CHECKPOINT_CORRUPT);
  EXPECT_EQ(detail->file(), "ps2.safetensors");
  EXPECT_EQ(responses[0].bytes_read(), 100);  // the others answered

  // A ps that cannot be reached, after the retries: PS_UNAVAILABLE naming it.
  Fail(1, "SetGeneration", absl::UnavailableError("connection refused"));
  s = client_->SetGenerationAll(8);
  ExpectPsDetail(s, ErrorDetail::PS_UNAVAILABLE, 1);
  EXPECT_EQ(SeenBy(1).size(), 1u + options_.max_attempts);
}

TEST_F(PsClientControlTest, HealthEachProbesEachPsOnceWithItsOwnResult) {
  Fail(1, "Health", absl::UnavailableError("connection refused"));
  std::vector<absl::Status> statuses;
  std::vector<HealthResponse> health;
  client_->HealthEach(/*from_chief=*/true, absl::Seconds(2), &statuses, &health);
  ASSERT_EQ(statuses.size(), 3u);
  ASSERT_EQ(health.size(), 3u);
  EXPECT_TRUE(statuses[0].ok()) << statuses[0];
  EXPECT_TRUE(statuses[2].ok()) << statuses[2];
  EXPECT_EQ(statuses[1].code(), absl::StatusCode::kUnavailable);
  ExpectPsDetail(statuses[1], ErrorDetail::PS_UNAVAILABLE, 1);
  EXPECT_EQ(health[2].incarnation(), 79u);
  for (int p = 0; p < 3; ++p) {
    std::vector<Seen> seen = SeenBy(p);
    ASSERT_EQ(seen.size(), 1u) << "ps " << p << ": a probe is not retried";
    EXPECT_EQ(seen[0].request, "from_chief: true");
    EXPECT_LE(seen[0].deadline, absl::Now() + absl::Seconds(2));
  }
}

}  // namespace
}  // namespace shardps
