// Process-level tests of the ps daemons and the client library: real daemons, real gRPC on
// localhost ports chosen here, configured by TF_CONFIG.
#include <signal.h>

#include <cmath>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/grpc_ps_interface.h"
#include "client/local_ps_interface.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "ps_server/shard_store.h"
#include "tests/ps_cluster.h"

namespace shardps {
namespace testing {
namespace {

std::vector<float> RandomValues(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

std::unique_ptr<Partitioner> Fixed(int n) { return *NewFixedShardsPartitioner(n); }

VariableDef Def(const std::string& name, std::vector<int64_t> shape,
                OptimizerSpec::Type opt = OptimizerSpec::SGD, double lr = 0.1) {
  VariableDef def;
  def.name = name;
  def.shape = std::move(shape);
  def.initializer.set_type(InitializerSpec::RANDOM_NORMAL);
  def.initializer.set_seed(7);
  def.optimizer.set_type(opt);
  def.optimizer.set_learning_rate(lr);
  return def;
}

class PsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = PsCluster::Start(3);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = std::move(*cluster);
    auto client = cluster_->NewClient();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
  }

  std::unique_ptr<PsCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

TEST_F(PsIntegrationTest, LargeVariableRoundTripsBitForBit) {
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(client_->CreateVariables({Def("emb", {10001, 64})}, *Fixed(3), placer.get()).ok());
  VariableLayout layout = *client_->GetLayout("emb");
  ASSERT_EQ(layout.shards.size(), 3u);
  EXPECT_EQ(layout.shards[0].rows, 3334);
  EXPECT_EQ(layout.shards[2].rows, 3333);
  EXPECT_EQ(layout.shards[1].ps, 1);

  // Initial values do not depend on the partitioning: compare with one whole shard held by an
  // in-process store.
  auto local_store = *ShardStore::Create({});
  std::vector<std::unique_ptr<PsInterface>> local_ps;
  local_ps.push_back(NewLocalPsInterface("local", local_store.get()));
  auto local = *PsClient::Create(std::move(local_ps), {});
  auto one = *NewRoundRobinPlacer(1);
  ASSERT_TRUE(local->CreateVariables({Def("emb", {10001, 64})}, *Fixed(1), one.get()).ok());
  std::vector<float> whole(10001 * 64), sharded(10001 * 64);
  ASSERT_TRUE(local->Pull("emb", absl::MakeSpan(whole)).ok());
  ASSERT_TRUE(client_->Pull("emb", absl::MakeSpan(sharded)).ok());
  EXPECT_EQ(0, std::memcmp(whole.data(), sharded.data(), whole.size() * 4));

  std::vector<float> values = RandomValues(10001 * 64, 1);
  ASSERT_TRUE(client_->Assign("emb", values).ok());
  std::vector<float> back(values.size());
  ASSERT_TRUE(client_->Pull("emb", absl::MakeSpan(back)).ok());
  EXPECT_EQ(0, std::memcmp(values.data(), back.data(), values.size() * 4));

  // A second client that did not create the variable finds it by Discover().
  auto other = *cluster_->NewClient();
  ASSERT_TRUE(other->Discover().ok());
  std::vector<float> back2(values.size());
  ASSERT_TRUE(other->Pull("emb", absl::MakeSpan(back2)).ok());
  EXPECT_EQ(0, std::memcmp(values.data(), back2.data(), values.size() * 4));

  // Rows by id, in request order, duplicates and all shards.
  std::vector<int64_t> ids = {10000, 0, 3334, 3333, 0, 6667, 42};
  std::vector<float> rows(ids.size() * 64);
  ASSERT_TRUE(client_->PullRows("emb", ids, absl::MakeSpan(rows)).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(&rows[i * 64], &values[ids[i] * 64], 64 * 4)) << "id " << ids[i];
  }
}

TEST_F(PsIntegrationTest, SmallChunksStillRoundTrip) {
  PsClient::Options options;
  options.max_chunk_bytes = 1000;  // forces many chunks per shard
  auto client = *cluster_->NewClient(options);
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(client->CreateVariables({Def("w", {997, 13})}, *Fixed(2), placer.get()).ok());
  std::vector<float> values = RandomValues(997 * 13, 2);
  ASSERT_TRUE(client->Assign("w", values).ok());
  std::vector<float> back(values.size());
  ASSERT_TRUE(client->Pull("w", absl::MakeSpan(back)).ok());
  EXPECT_EQ(values, back);
}

struct OptimizerCase {
  OptimizerSpec spec;
  std::string label;
};

// A scalar-per-element reference of each optimizer, written out independently here.
void ReferenceStep(const OptimizerSpec& spec, int t, float g, float* p, float* s0, float* s1) {
  double lr = spec.learning_rate();
  switch (spec.type()) {
    case OptimizerSpec::SGD:
      *p -= lr * g;
      break;
    case OptimizerSpec::MOMENTUM: {
      double m = spec.momentum();
      *s0 = m * *s0 - lr * g;
      if (spec.nesterov()) {
        *p += m * *s0 - lr * g;
      } else {
        *p += *s0;
      }
      break;
    }
    case OptimizerSpec::ADAGRAD:
      *s0 += g * g;
      *p -= lr * g / (std::sqrt(*s0) + 1e-7);
      break;
    case OptimizerSpec::ADAM: {
      double b1 = 0.9, b2 = 0.999, eps = 1e-7;
      double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
      *s0 = b1 * *s0 + (1 - b1) * g;
      *s1 = b2 * *s1 + (1 - b2) * g * g;
      *p -= lr_t * *s0 / (std::sqrt(*s1) + eps);
      break;
    }
    case OptimizerSpec::FTRL: {  // TF's defaults: power -0.5, no regularization
      const double acc_new = *s0 + g * g;
      *s1 += g - (std::sqrt(acc_new) - std::sqrt(*s0)) / lr * *p;
      *p = -*s1 / (std::sqrt(acc_new) / lr);
      *s0 = acc_new;
      break;
    }
    default:
      break;
  }
}

TEST_F(PsIntegrationTest, EachOptimizerMatchesReference) {
  std::vector<OptimizerCase> cases;
  auto add = [&](OptimizerSpec::Type type, const std::string& label, double momentum = 0,
                 bool nesterov = false) {
    OptimizerSpec s;
    s.set_type(type);
    s.set_learning_rate(0.05);
    s.set_momentum(momentum);
    s.set_nesterov(nesterov);
    cases.push_back({s, label});
  };
  add(OptimizerSpec::SGD, "sgd");
  add(OptimizerSpec::MOMENTUM, "momentum", 0.9);
  add(OptimizerSpec::MOMENTUM, "nesterov", 0.9, true);
  add(OptimizerSpec::ADAGRAD, "adagrad");
  add(OptimizerSpec::ADAM, "adam");
  add(OptimizerSpec::FTRL, "ftrl");
  auto placer = *NewRoundRobinPlacer(3);
  const int64_t rows = 37, cols = 5, n = rows * cols;
  for (const auto& c : cases) {
    VariableDef def = Def(c.label, {rows, cols});
    def.initializer.set_type(InitializerSpec::CONSTANT);
    def.initializer.set_value(0.5);
    def.optimizer = c.spec;
    ASSERT_TRUE(client_->CreateVariables({def}, *Fixed(3), placer.get()).ok()) << c.label;
    std::vector<float> p(n, 0.5f), s0(n, 0.f), s1(n, 0.f);
    if (c.spec.type() == OptimizerSpec::ADAGRAD || c.spec.type() == OptimizerSpec::FTRL) {
      s0.assign(n, 0.1f);
    }
    for (int t = 1; t <= 5; ++t) {
      std::vector<float> g = RandomValues(n, 100 + t);
      ASSERT_TRUE(client_->Push(c.label, g).ok()) << c.label;
      for (int64_t i = 0; i < n; ++i) ReferenceStep(c.spec, t, g[i], &p[i], &s0[i], &s1[i]);
    }
    std::vector<float> got(n);
    ASSERT_TRUE(client_->Pull(c.label, absl::MakeSpan(got)).ok());
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(got[i], p[i], 1e-5 + 1e-5 * std::fabs(p[i])) << c.label << " element " << i;
    }
  }
}

TEST_F(PsIntegrationTest, RowPushSumsDuplicateIds) {
  auto placer = *NewRoundRobinPlacer(3);
  VariableDef def = Def("table", {100, 4});
  def.initializer.set_type(InitializerSpec::ZEROS);
  def.optimizer.set_learning_rate(1.0);
  ASSERT_TRUE(client_->CreateVariables({def}, *Fixed(3), placer.get()).ok());
  std::vector<int64_t> ids = {5, 99, 5, 50};
  std::vector<float> grads = {1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4};
  ASSERT_TRUE(client_->PushRows("table", ids, grads).ok());
  std::vector<float> all(400);
  ASSERT_TRUE(client_->Pull("table", absl::MakeSpan(all)).ok());
  EXPECT_FLOAT_EQ(all[5 * 4], -4.f);  // 1 + 3 summed, lr 1
  EXPECT_FLOAT_EQ(all[99 * 4 + 3], -2.f);
  EXPECT_FLOAT_EQ(all[50 * 4 + 1], -4.f);
  EXPECT_FLOAT_EQ(all[6 * 4], 0.f);
}

// Rows of several tables in one call (PullRowsMany / PushRowsMany: one batch per ps and
// max_chunk_bytes) change and read exactly what a call per table does: three rounds of
// pushes with duplicate ids to two fixed tables and a dynamic one on three daemons, against
// the same tables in one in-process store written one table at a time, bit for bit. The
// first round goes out as a call per request (the client has not yet heard that the ps
// takes batches), the later ones as batches, several per ps (small chunks).
TEST_F(PsIntegrationTest, RowCallsOfManyTablesMatchOneCallPerTable) {
  PsClient::Options options;
  options.max_chunk_bytes = 40 * 8 * sizeof(float);  // 40 rows of 8 floats a batch
  auto batched = cluster_->NewClient(options);
  ASSERT_TRUE(batched.ok()) << batched.status();
  auto local_store = *ShardStore::Create({});
  std::vector<std::unique_ptr<PsInterface>> local_ps;
  local_ps.push_back(NewLocalPsInterface("local", local_store.get()));
  auto reference = *PsClient::Create(std::move(local_ps), {});

  VariableDef a = Def("a", {1000, 8}, OptimizerSpec::ADAGRAD, 0.5);
  VariableDef b = Def("b", {77, 4}, OptimizerSpec::ADAGRAD, 0.5);
  VariableDef c = Def("c", {0, 8}, OptimizerSpec::ADAGRAD, 0.5);
  c.dynamic = DynamicTableDef{};
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE((*batched)->CreateVariables({a, b, c}, *Fixed(3), placer.get()).ok());
  auto one = *NewRoundRobinPlacer(1);
  ASSERT_TRUE(reference->CreateVariables({a, b, c}, *Fixed(1), one.get()).ok());

  std::mt19937_64 gen(11);
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> ids_a(300), ids_b(50), ids_c(200);
    for (int64_t& id : ids_a) id = static_cast<int64_t>(gen() % 40) * 25;  // duplicates
    for (int64_t& id : ids_b) id = static_cast<int64_t>(gen() % 77);
    for (int64_t& id : ids_c) id = static_cast<int64_t>(gen() % 300) * 1000003 - 150000000;
    const std::vector<float> ga = RandomValues(300 * 8, 100 + round);
    const std::vector<float> gb = RandomValues(50 * 4, 200 + round);
    const std::vector<float> gc = RandomValues(200 * 8, 300 + round);
    ASSERT_TRUE((*batched)->PushRowsMany({{"a", ids_a, ga}, {"b", ids_b, gb}, {"c", ids_c, gc}})
                    .ok());
    ASSERT_TRUE(reference->PushRows("a", ids_a, ga).ok());
    ASSERT_TRUE(reference->PushRows("b", ids_b, gb).ok());
    ASSERT_TRUE(reference->PushRows("c", ids_c, gc).ok());

    std::vector<float> got_a(ids_a.size() * 8), got_b(ids_b.size() * 4), got_c(ids_c.size() * 8);
    PullVersions versions;
    ASSERT_TRUE((*batched)
                    ->PullRowsMany({{"a", ids_a, absl::MakeSpan(got_a)},
                                    {"b", ids_b, absl::MakeSpan(got_b)},
                                    {"c", ids_c, absl::MakeSpan(got_c)}},
                                   {}, &versions)
                    .ok());
    // Every shard read: 3 of a, 3 of b, and c's one per ps.
    EXPECT_EQ(versions.shards.size(), 9u) << "round " << round;
    EXPECT_GE(versions.min_version, round);
    std::vector<float> want_a(got_a.size()), want_b(got_b.size()), want_c(got_c.size());
    ASSERT_TRUE(reference->PullRows("a", ids_a, absl::MakeSpan(want_a)).ok());
    ASSERT_TRUE(reference->PullRows("b", ids_b, absl::MakeSpan(want_b)).ok());
    ASSERT_TRUE(reference->PullRows("c", ids_c, absl::MakeSpan(want_c)).ok());
    EXPECT_EQ(0, std::memcmp(got_a.data(), want_a.data(), got_a.size() * 4)) << round;
    EXPECT_EQ(0, std::memcmp(got_b.data(), want_b.data(), got_b.size() * 4)) << round;
    EXPECT_EQ(0, std::memcmp(got_c.data(), want_c.data(), got_c.size() * 4)) << round;
  }
  // A bad table anywhere in the call fails it, naming the table.
  std::vector<float> out(8);
  absl::Status bad = (*batched)->PullRowsMany(
      {{"a", std::vector<int64_t>{1}, absl::MakeSpan(out)},
       {"nope", std::vector<int64_t>{1}, absl::MakeSpan(out)}});
  EXPECT_EQ(bad.code(), absl::StatusCode::kNotFound) << bad;
  EXPECT_NE(bad.message().find("nope"), std::string::npos) << bad;
}

// Raw requests to one ps, bypassing the client's validation, to see what the daemon does.
class RawPsTest : public PsIntegrationTest {
 protected:
  absl::Status Call(const std::function<void(PsInterface*, absl::Time, StatusCallback)>& fn) {
    auto ps = NewGrpcPsInterface("ps:0", cluster_->addresses()[0]);
    absl::Notification done;
    absl::Status result;
    fn(ps.get(), absl::Now() + absl::Seconds(10), [&](const absl::Status& s) {
      result = s;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  }
  absl::Status RawPush(const PushRequest& request, PushResponse* response) {
    return Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
      ps->PushAsync(&request, response, d, std::move(cb));
    });
  }
};

TEST_F(RawPsTest, RetriedRequestIdIsAppliedOnce) {
  auto placer = *NewRoundRobinPlacer(3);
  VariableDef def = Def("v", {4, 2});
  def.initializer.set_type(InitializerSpec::ZEROS);
  ASSERT_TRUE(client_->CreateVariables({def}, *Fixed(1), placer.get()).ok());
  ASSERT_EQ(client_->GetLayout("v")->shards[0].ps, 0);
  PushRequest request;
  request.set_request_id(12345);
  request.set_shard("v");
  std::vector<float> g(8, 1.f);
  request.set_data(g.data(), g.size() * 4);
  PushResponse first, second;
  ASSERT_TRUE(RawPush(request, &first).ok());
  ASSERT_TRUE(RawPush(request, &second).ok());
  EXPECT_FALSE(first.duplicate());
  EXPECT_TRUE(second.duplicate());
  std::vector<float> got(8);
  PullVersions versions;
  ASSERT_TRUE(client_->Pull("v", absl::MakeSpan(got), {}, &versions).ok());
  EXPECT_EQ(versions.max_version, 1);
  for (float x : got) EXPECT_FLOAT_EQ(x, -0.1f);
}

// The batched calls over gRPC: items of two shards in one call each way, bytes scattered
// into and gathered from separate buffers; a wrong-sized output is an error naming the shard.
TEST_F(RawPsTest, PullAndPushBatchesOverTheWire) {
  auto placer = *NewRoundRobinPlacer(1);  // every shard on ps 0
  VariableDef a = Def("a", {300, 5}), b = Def("b", {7});
  a.initializer.set_type(InitializerSpec::ZEROS);
  b.initializer.set_type(InitializerSpec::ZEROS);
  ASSERT_TRUE(client_->CreateVariables({a, b}, *Fixed(1), placer.get()).ok());
  std::vector<float> ga(1500), gb(7);
  for (size_t i = 0; i < ga.size(); ++i) ga[i] = 0.001f * static_cast<float>(i);
  for (size_t i = 0; i < gb.size(); ++i) gb[i] = -1.0f * static_cast<float>(i);
  PushBatchRequest push;
  PushRequest* item = push.add_pushes();
  item->set_request_id(501);
  item->set_shard("b");
  item = push.add_pushes();
  item->set_request_id(502);
  item->set_shard("a");
  item->set_row_begin(100);
  item->set_row_end(300);
  const absl::Span<const char> data[] = {
      absl::MakeConstSpan(reinterpret_cast<const char*>(gb.data()), gb.size() * 4),
      absl::MakeConstSpan(reinterpret_cast<const char*>(ga.data() + 500), 1000 * 4)};
  PushBatchResponse pushed;
  ASSERT_TRUE(Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
                ps->PushBatchAsync(&push, data, &pushed, d, std::move(cb));
              }).ok());
  ASSERT_EQ(pushed.pushes_size(), 2);
  EXPECT_TRUE(pushed.pushes(1).applied());

  PullBatchRequest pull;
  pull.add_pulls()->set_shard("a");
  pull.add_pulls()->set_shard("b");
  std::vector<float> got_a(1500, 9.f), got_b(7, 9.f);
  absl::Span<char> outs[] = {
      absl::MakeSpan(reinterpret_cast<char*>(got_a.data()), got_a.size() * 4),
      absl::MakeSpan(reinterpret_cast<char*>(got_b.data()), got_b.size() * 4)};
  PullBatchResponse pulled;
  ASSERT_TRUE(Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
                ps->PullBatchAsync(&pull, &pulled, outs, d, std::move(cb));
              }).ok());
  ASSERT_EQ(pulled.pulls_size(), 2);
  EXPECT_EQ(pulled.pulls(0).version(), 1);
  EXPECT_TRUE(pulled.data().empty());
  for (size_t i = 0; i < 1500; ++i) {
    ASSERT_FLOAT_EQ(got_a[i], i < 500 ? 0.f : -0.1f * ga[i]) << i;  // SGD, lr 0.1
  }
  for (size_t i = 0; i < 7; ++i) ASSERT_FLOAT_EQ(got_b[i], -0.1f * gb[i]);

  outs[1] = absl::MakeSpan(reinterpret_cast<char*>(got_b.data()), 6 * 4);
  absl::Status wrong = Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
    ps->PullBatchAsync(&pull, &pulled, outs, d, std::move(cb));
  });
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInternal);
  EXPECT_NE(wrong.message().find("\"b\""), std::string::npos) << wrong;
  EXPECT_NE(wrong.message().find("28 bytes, expected 24"), std::string::npos) << wrong;

  // A multi-MiB batch arrives over many HTTP/2 frames and receive slices, so its floats are
  // split and misaligned where the ps reads them: a NaN deep inside is still found, named and
  // nothing is applied; the same batch without it applies exactly.
  VariableDef big = Def("big", {1 << 19});  // 2 MiB
  big.initializer.set_type(InitializerSpec::ZEROS);
  ASSERT_TRUE(client_->CreateVariables({big}, *Fixed(1), placer.get()).ok());
  std::vector<float> gbig(1 << 19);
  for (size_t i = 0; i < gbig.size(); ++i) gbig[i] = static_cast<float>(i % 1000) - 500.f;
  gbig[400001] = std::nanf("");
  PushBatchRequest large;
  item = large.add_pushes();
  item->set_request_id(601);
  item->set_shard("big");
  const absl::Span<const char> big_data[] = {
      absl::MakeConstSpan(reinterpret_cast<const char*>(gb.data()), gb.size() * 4),
      absl::MakeConstSpan(reinterpret_cast<const char*>(gbig.data()), gbig.size() * 4)};
  item = large.add_pushes();  // "b" first in the data: the big item starts 28 bytes in
  large.mutable_pushes()->SwapElements(0, 1);
  large.mutable_pushes(0)->set_shard("b");
  large.mutable_pushes(0)->set_request_id(602);
  PushBatchResponse large_pushed;
  absl::Status rejected = Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
    ps->PushBatchAsync(&large, big_data, &large_pushed, d, std::move(cb));
  });
  EXPECT_EQ(rejected.code(), absl::StatusCode::kInvalidArgument) << rejected;
  EXPECT_NE(rejected.message().find("data[400001] is nan"), std::string::npos) << rejected;
  std::vector<float> got_big(gbig.size(), 9.f);
  ASSERT_TRUE(client_->Pull("big", absl::MakeSpan(got_big), {}, nullptr).ok());
  for (size_t i = 0; i < got_big.size(); ++i) ASSERT_EQ(got_big[i], 0.f) << i;
  gbig[400001] = 2.f;
  large.mutable_pushes(0)->set_request_id(603);  // "b" was applied before the failure
  large.mutable_pushes(1)->set_request_id(604);
  ASSERT_TRUE(Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
                ps->PushBatchAsync(&large, big_data, &large_pushed, d, std::move(cb));
              }).ok());
  ASSERT_TRUE(client_->Pull("big", absl::MakeSpan(got_big), {}, nullptr).ok());
  for (size_t i = 0; i < got_big.size(); ++i) ASSERT_EQ(got_big[i], -0.1f * gbig[i]) << i;

  // An empty batch is answered at once, empty.
  PullBatchRequest none;
  PullBatchResponse nothing;
  EXPECT_TRUE(Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
                ps->PullBatchAsync(&none, &nothing, {}, d, std::move(cb));
              }).ok());
  EXPECT_EQ(nothing.pulls_size(), 0);
}

// The row batches over gRPC, on one connection that has heard the ps say it takes them: a
// pull batch's rows land in their spans, each item with its version; a push batch is applied
// in order up to its first failure, which names its shard, and a retry applies each item
// once (the first answered as a duplicate).
TEST_F(RawPsTest, RowBatchesOverTheWire) {
  auto placer = *NewRoundRobinPlacer(1);  // every shard on ps 0
  VariableDef t = Def("t", {50, 3}), u = Def("u", {20, 2});
  t.initializer.set_type(InitializerSpec::ZEROS);
  u.initializer.set_type(InitializerSpec::ZEROS);
  ASSERT_TRUE(client_->CreateVariables({t, u}, *Fixed(1), placer.get()).ok());
  auto ps = NewGrpcPsInterface("ps:0", cluster_->addresses()[0]);
  auto call = [&](const std::function<void(absl::Time, StatusCallback)>& fn) {
    absl::Notification done;
    absl::Status result;
    fn(absl::Now() + absl::Seconds(10), [&](const absl::Status& s) {
      result = s;
      done.Notify();
    });
    done.WaitForNotification();
    return result;
  };
  auto raw_ids = [](std::vector<int64_t> ids) {
    return std::string(reinterpret_cast<const char*>(ids.data()), ids.size() * 8);
  };
  {  // A first row call: the reply says that this ps takes batches.
    PullRowsRequest first;
    first.set_shard("t");
    first.add_ids(0);
    PullRowsResponse reply;
    ASSERT_TRUE(call([&](absl::Time d, StatusCallback cb) {
                  ps->PullRowsAsync(&first, &reply, d, std::move(cb));
                }).ok());
  }
  const std::vector<float> gt = {1, 2, 3, 4, 5, 6};  // rows 4 and 7 of t
  const std::vector<float> gu = {10, 20};            // row 3 of u
  PushRowsBatchRequest push;
  PushRowsRequest* item = push.add_pushes();
  item->set_request_id(701);
  item->set_shard("t");
  item->set_ids_bytes(raw_ids({4, 7}));
  item->set_data(gt.data(), gt.size() * 4);
  item = push.add_pushes();
  item->set_request_id(702);
  item->set_shard("nope");
  item->set_ids_bytes(raw_ids({3}));
  item->set_data(gu.data(), gu.size() * 4);
  PushRowsBatchResponse pushed;
  absl::Status failed = call([&](absl::Time d, StatusCallback cb) {
    ps->PushRowsBatchAsync(&push, &pushed, d, std::move(cb));
  });
  EXPECT_EQ(failed.code(), absl::StatusCode::kNotFound) << failed;
  EXPECT_NE(failed.message().find("'nope'"), std::string::npos) << failed;
  push.mutable_pushes(1)->set_shard("u");
  ASSERT_TRUE(call([&](absl::Time d, StatusCallback cb) {
                ps->PushRowsBatchAsync(&push, &pushed, d, std::move(cb));
              }).ok());
  ASSERT_EQ(pushed.pushes_size(), 2);
  EXPECT_TRUE(pushed.pushes(0).duplicate()) << "applied before the failure, not again";
  EXPECT_TRUE(pushed.pushes(1).applied());

  PullRowsBatchRequest pull;
  PullRowsRequest* p = pull.add_pulls();
  p->set_shard("t");
  p->set_ids_bytes(raw_ids({7, 4, 5}));
  p = pull.add_pulls();
  p->set_shard("u");
  p->set_ids_bytes(raw_ids({3, 3}));
  std::vector<float> rows(3 * 3 + 2 * 2, 9.f);
  // Each row's span, the t rows first: rows of 3 floats, then of 2.
  std::vector<absl::Span<char>> outs;
  for (int r = 0; r < 3; ++r) outs.emplace_back(reinterpret_cast<char*>(&rows[r * 3]), 12);
  for (int r = 0; r < 2; ++r) outs.emplace_back(reinterpret_cast<char*>(&rows[9 + r * 2]), 8);
  PullRowsBatchResponse pulled;
  ASSERT_TRUE(call([&](absl::Time d, StatusCallback cb) {
                ps->PullRowsBatchIntoAsync(&pull, &pulled, outs, d, std::move(cb));
              }).ok());
  ASSERT_EQ(pulled.pulls_size(), 2);
  EXPECT_EQ(pulled.pulls(0).version(), 1);
  EXPECT_EQ(pulled.pulls(1).version(), 1);
  EXPECT_TRUE(pulled.data().empty());
  const std::vector<float> want = {-0.4f, -0.5f, -0.6f, -0.1f, -0.2f, -0.3f, 0, 0, 0,
                                   -1.0f, -2.0f, -1.0f, -2.0f};  // SGD, lr 0.1
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(rows[i], want[i]) << i;
  // Spans that do not add up to the reply: INTERNAL, and nothing written.
  outs.pop_back();
  absl::Status wrong = call([&](absl::Time d, StatusCallback cb) {
    ps->PullRowsBatchIntoAsync(&pull, &pulled, outs, d, std::move(cb));
  });
  EXPECT_EQ(wrong.code(), absl::StatusCode::kInternal) << wrong;
}

TEST_F(RawPsTest, BadRequestsAreRejectedWithoutChange) {
  auto placer = *NewRoundRobinPlacer(3);
  ASSERT_TRUE(client_->CreateVariables({Def("v", {4, 2})}, *Fixed(1), placer.get()).ok());
  std::vector<float> before(8);
  ASSERT_TRUE(client_->Pull("v", absl::MakeSpan(before)).ok());

  auto push = [&](const std::string& shard, std::vector<float> g, uint64_t id) {
    PushRequest r;
    r.set_request_id(id);
    r.set_shard(shard);
    r.set_data(g.data(), g.size() * 4);
    PushResponse resp;
    return RawPush(r, &resp);
  };
  absl::Status s = push("nope", std::vector<float>(8, 1.f), 1);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("nope"), std::string::npos) << s;
  s = push("v", std::vector<float>(7, 1.f), 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("shard 'v'"), std::string::npos) << s;
  std::vector<float> nan(8, 1.f);
  nan[3] = std::nanf("");
  s = push("v", nan, 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> inf(8, 1.f);
  inf[7] = INFINITY;
  s = push("v", inf, 4);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = push("v", std::vector<float>(8, 1.f), 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << "request id 0";

  PullRowsRequest rows;
  rows.set_shard("v");
  rows.add_ids(4);
  PullRowsResponse rows_resp;
  s = Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
    ps->PullRowsAsync(&rows, &rows_resp, d, std::move(cb));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  PushRowsRequest push_rows;
  push_rows.set_request_id(9);
  push_rows.set_shard("v");
  push_rows.add_ids(-1);
  std::vector<float> g2(2, 1.f);
  push_rows.set_data(g2.data(), 8);
  PushRowsResponse push_rows_resp;
  s = Call([&](PsInterface* ps, absl::Time d, StatusCallback cb) {
    ps->PushRowsAsync(&push_rows, &push_rows_resp, d, std::move(cb));
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  // Conflicting re-creation.
  VariableDef conflicting = Def("v", {4, 2}, OptimizerSpec::ADAM);
  auto placer2 = *NewRoundRobinPlacer(3);
  s = client_->CreateVariables({conflicting}, *Fixed(1), placer2.get());
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists) << s;

  // Client-side validation names the variable and the id.
  std::vector<float> out(2);
  s = client_->PullRows("v", std::vector<int64_t>{4}, absl::MakeSpan(out));
  EXPECT_NE(s.message().find("row id 4"), std::string::npos) << s;

  std::vector<float> after(8);
  ASSERT_TRUE(client_->Pull("v", absl::MakeSpan(after)).ok());
  EXPECT_EQ(0, std::memcmp(before.data(), after.data(), 32));
  std::vector<HealthResponse> health;
  EXPECT_TRUE(client_->Health(&health).ok());
  EXPECT_EQ(health[0].status(), "SERVING");
}

TEST(PsDaemonTest, MalformedTfConfigExitsTwoNamingTheField) {
  struct Case {
    std::string tf_config;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"{not json", "TF_CONFIG"},
      {R"({"cluster": {"ps": ["localhost:2222"]}, "task": {"type": "ps", "index": 3}})",
       "task.index"},
      {R"({"cluster": {"ps": ["localhost:99999"]}, "task": {"type": "ps", "index": 0}})",
       "cluster.ps[0]"},
      {R"({"cluster": {"ps": ["a:1", "a:1"]}, "task": {"type": "ps", "index": 0}})", "a:1"},
      {R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})", "ps"},
      {R"({"cluster": {"ps": ["a:1"], "boss": ["b:2"]}, "task": {"type": "ps", "index": 0}})",
       "boss"},
  };
  for (const Case& c : cases) {
    std::string output;
    auto code = RunCommand(BinaryPath("ps_server/ps"), {}, {{"TF_CONFIG", c.tf_config}}, &output);
    ASSERT_TRUE(code.ok());
    EXPECT_EQ(*code, 2) << c.tf_config << "\n" << output;
    EXPECT_NE(output.find(c.expect), std::string::npos) << c.tf_config << "\n" << output;
  }
  std::string output;
  auto code = RunCommand(
      BinaryPath("ps_server/ps"),
      {"--validate_config",
       R"(--tf_config={"cluster": {"ps": ["localhost:2222", "[::1]:2223"]}, "task": {"type": "ps", "index": "1"}})"},
      {}, &output);
  ASSERT_TRUE(code.ok());
  EXPECT_EQ(*code, 0) << output;
  EXPECT_NE(output.find("[::1]:2223"), std::string::npos) << output;
  code = RunCommand(BinaryPath("ps_server/ps"), {"--no_such_flag"}, {}, &output);
  EXPECT_EQ(*code, 2) << output;
  EXPECT_NE(output.find("no_such_flag"), std::string::npos) << output;
}

TEST(PsDaemonTest, ShutdownRpcStopsDaemonWithExitZero) {
  auto cluster = PsCluster::Start(1);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = *(*cluster)->NewClient();
  ASSERT_TRUE(client->ShutdownAll("test done").ok());
  auto code = (*cluster)->ps(0)->Wait(absl::Seconds(20));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*cluster)->Logs();
}

}  // namespace
}  // namespace testing
}  // namespace shardps
