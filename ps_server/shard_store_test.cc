#include "ps_server/shard_store.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/error_detail.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

std::string Bytes(const std::vector<float>& v) {
  std::string s(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(&s[0], v.data(), s.size());
  return s;
}

std::vector<float> Floats(const std::string& s) {
  std::vector<float> v(s.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

OptimizerSpec Sgd(double lr = 1.0) {
  OptimizerSpec o;
  o.set_type(OptimizerSpec::SGD);
  o.set_learning_rate(lr);
  return o;
}

OptimizerSpec Adam() {
  OptimizerSpec o;
  o.set_type(OptimizerSpec::ADAM);
  o.set_learning_rate(0.01);
  return o;
}

InitializerSpec Constant(double value) {
  InitializerSpec i;
  i.set_type(InitializerSpec::CONSTANT);
  i.set_value(value);
  return i;
}

InitializerSpec Glorot(uint64_t seed = 3) {
  InitializerSpec i;
  i.set_type(InitializerSpec::GLOROT_UNIFORM);
  i.set_seed(seed);
  return i;
}

// A whole (unsplit) variable.
ShardSpec Spec(const std::string& name, std::vector<int64_t> shape,
               OptimizerSpec optimizer = Sgd(), InitializerSpec init = Glorot()) {
  ShardSpec s;
  s.set_name(name);
  s.set_variable(name);
  s.set_num_parts(1);
  for (int64_t d : shape) {
    s.mutable_shape()->add_dim(d);
    s.mutable_full_shape()->add_dim(d);
  }
  *s.mutable_optimizer() = optimizer;
  *s.mutable_initializer() = init;
  return s;
}

ShardSpec SyncSpec(const std::string& name, std::vector<int64_t> shape, int replicas,
                   OptimizerSpec optimizer = Adam()) {
  ShardSpec s = Spec(name, shape, optimizer);
  s.mutable_update()->set_mode(UpdateSpec::SYNC);
  s.mutable_update()->set_num_replicas(replicas);
  return s;
}

std::unique_ptr<ShardStore> NewStore(int64_t window = 1 << 16) {
  ShardStore::Options options;
  options.task_index = 2;
  options.request_id_window = window;
  auto store = ShardStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

absl::Status Create(ShardStore& store, std::vector<ShardSpec> specs, int* created = nullptr) {
  CreateShardsRequest request;
  for (auto& s : specs) *request.add_shards() = s;
  CreateShardsResponse response;
  absl::Status status = store.CreateShards(request, &response);
  if (created != nullptr) *created = response.created();
  return status;
}

// A pull that does not wait: `done` runs before Pull returns.
absl::Status PullNow(ShardStore& store, const PullRequest& request, PullResponse* response) {
  absl::Status result = absl::InternalError("done not called");
  bool called = false;
  store.Pull(request, response, [&](const absl::Status& s) {
    EXPECT_FALSE(called);
    called = true;
    result = s;
  });
  EXPECT_TRUE(called);
  return result;
}

struct Snapshot {
  std::vector<float> data;
  int64_t version;
};

Snapshot PullAll(ShardStore& store, const std::string& shard) {
  PullRequest request;
  request.set_shard(shard);
  PullResponse response;
  EXPECT_TRUE(PullNow(store, request, &response).ok());
  return {Floats(response.data()), response.version()};
}

absl::Status Push(ShardStore& store, const std::string& shard, uint64_t id,
                  const std::vector<float>& grad, int64_t begin = 0, int64_t end = 0,
                  PushResponse* out = nullptr, int64_t step = 0, int replica = 0) {
  PushRequest request;
  request.set_request_id(id);
  request.set_shard(shard);
  request.set_row_begin(begin);
  request.set_row_end(end);
  request.set_data(Bytes(grad));
  request.mutable_sync()->set_step(step);
  request.mutable_sync()->set_replica(replica);
  PushResponse response;
  absl::Status s = store.Push(request, &response);
  if (out != nullptr) *out = response;
  return s;
}

absl::Status PushRows(ShardStore& store, const std::string& shard, uint64_t id,
                      const std::vector<int64_t>& ids, const std::vector<float>& grad,
                      PushRowsResponse* out = nullptr, int64_t step = 0, int replica = 0) {
  PushRowsRequest request;
  request.set_request_id(id);
  request.set_shard(shard);
  for (int64_t i : ids) request.add_ids(i);
  request.set_data(Bytes(grad));
  request.mutable_sync()->set_step(step);
  request.mutable_sync()->set_replica(replica);
  PushRowsResponse response;
  absl::Status s = store.PushRows(request, &response);
  if (out != nullptr) *out = response;
  return s;
}

std::vector<float> Ramp(size_t n, float scale = 1.0f, float shift = 0.0f) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * i + shift) + 0.01f * i;
  return v;
}

TEST(ShardStoreTest, CreateIsIdempotentAndConflictsNameTheField) {
  auto store = NewStore();
  int created = -1;
  ASSERT_TRUE(Create(*store, {Spec("a", {4, 3}), Spec("b", {2})}, &created).ok());
  EXPECT_EQ(created, 2);
  ASSERT_TRUE(Create(*store, {Spec("a", {4, 3}), Spec("c", {5})}, &created).ok());
  EXPECT_EQ(created, 1);

  // A different spec for an existing shard fails the whole request and creates nothing.
  const absl::Status s =
      Create(*store, {Spec("d", {3}), Spec("a", {4, 3}, Sgd(0.5))}, &created);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StrContains(s.message(), "'a'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "learning_rate")) << s;
  ListShardsRequest list;
  ListShardsResponse listed;
  ASSERT_TRUE(store->ListShards(list, &listed).ok());
  EXPECT_EQ(listed.shards_size(), 3);
  EXPECT_EQ(listed.task_index(), 2);

  // A name twice in one request must carry one spec.
  EXPECT_EQ(Create(*store, {Spec("e", {3}), Spec("e", {4})}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Create(*store, {Spec("f", {3}), Spec("f", {3})}, &created).ok());
  EXPECT_EQ(created, 1);
}

TEST(ShardStoreTest, CreateValidatesEverySpecFirst) {
  auto store = NewStore();
  std::vector<std::pair<ShardSpec, std::string>> bad;
  bad.push_back({Spec("", {3}), "empty name"});
  bad.push_back({Spec("zero", {3, 0}), "'zero'"});
  ShardSpec offset = Spec("offset", {3, 2});
  offset.set_row_offset(2);
  bad.push_back({offset, "'offset'"});
  ShardSpec trailing = Spec("trailing", {3, 2});
  trailing.mutable_full_shape()->set_dim(1, 4);
  bad.push_back({trailing, "'trailing'"});
  ShardSpec rank = Spec("rank", {3, 2});
  rank.mutable_full_shape()->add_dim(1);
  bad.push_back({rank, "'rank'"});
  bad.push_back({Spec("lr", {3}, Sgd(0)), "learning_rate"});
  InitializerSpec uniform;
  uniform.set_type(InitializerSpec::RANDOM_UNIFORM);
  uniform.set_minval(1);
  uniform.set_maxval(-1);
  bad.push_back({Spec("init", {3}, Sgd(), uniform), "minval"});
  bad.push_back({SyncSpec("sync", {3}, 0), "num_replicas"});
  ShardSpec too_many = SyncSpec("k", {3}, 2);
  too_many.mutable_update()->set_replicas_to_aggregate(3);
  bad.push_back({too_many, "replicas_to_aggregate"});
  ShardSpec negative = SyncSpec("k", {3}, 2);
  negative.mutable_update()->set_replicas_to_aggregate(-1);
  bad.push_back({negative, "replicas_to_aggregate"});
  ShardSpec async_k = Spec("k", {3});
  async_k.mutable_update()->set_replicas_to_aggregate(1);
  bad.push_back({async_k, "replicas_to_aggregate"});
  for (const auto& [spec, needle] : bad) {
    int created = -1;
    // The good spec first: all or nothing.
    const absl::Status s = Create(*store, {Spec("good", {3}), spec}, &created);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << needle;
    EXPECT_TRUE(absl::StrContains(s.message(), needle)) << s;
  }
  HealthResponse health;
  store->Health(&health);
  EXPECT_EQ(health.num_shards(), 0);
}

TEST(ShardStoreTest, PullWholeAndRange) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {6, 4})}).ok());
  const Snapshot whole = PullAll(*store, "w");
  ASSERT_EQ(whole.data.size(), 24u);
  EXPECT_EQ(whole.version, 0);

  PullRequest request;
  request.set_shard("w");
  request.set_row_begin(2);
  request.set_row_end(5);
  PullResponse response;
  ASSERT_TRUE(PullNow(*store, request, &response).ok());
  EXPECT_EQ(Floats(response.data()),
            std::vector<float>(whole.data.begin() + 8, whole.data.begin() + 20));
  ASSERT_EQ(response.shape().dim_size(), 2);
  EXPECT_EQ(response.shape().dim(0), 3);
  EXPECT_EQ(response.shape().dim(1), 4);

  request.set_row_end(0);  // to the end
  ASSERT_TRUE(PullNow(*store, request, &response).ok());
  EXPECT_EQ(Floats(response.data()),
            std::vector<float>(whole.data.begin() + 8, whole.data.end()));

  PullRowsRequest rows;
  rows.set_shard("w");
  for (int64_t id : {5, 0, 5}) rows.add_ids(id);
  PullRowsResponse rows_response;
  absl::Status status;
  store->PullRows(rows, &rows_response, [&](const absl::Status& s) { status = s; });
  ASSERT_TRUE(status.ok()) << status;
  std::vector<float> expected;
  for (int64_t id : {5, 0, 5}) {
    expected.insert(expected.end(), whole.data.begin() + id * 4, whole.data.begin() + id * 4 + 4);
  }
  EXPECT_EQ(Floats(rows_response.data()), expected);
}

// A pull in place (the gRPC service's way) hands out views of the shard's blocks; updates
// that come while they are held copy those blocks instead of writing them, so the pull sends
// exactly the version it took. A waiting pull in place gets the version it waited for.
TEST(ShardStoreTest, InPlacePullsKeepTheirVersionThroughLaterUpdates) {
  auto store = NewStore();
  constexpr int64_t kRows = 1 << 19;  // 2 MiB: two parameter blocks
  ASSERT_TRUE(Create(*store, {Spec("big", {kRows}, Sgd(0.5))}).ok());
  const Snapshot v0 = PullAll(*store, "big");
  auto joined = [](const ShardStore::PulledBytes& b) {
    std::string all;
    for (absl::string_view p : b.pieces) all.append(p.data(), p.size());
    return Floats(all);
  };
  PullRequest range;
  range.set_shard("big");
  range.set_row_begin(1000);
  range.set_row_end(400000);
  ShardStore::PulledBytes held;
  PullResponse response;
  bool done = false;
  store->Pull(range, &response, &held, [&](const absl::Status& s) {
    EXPECT_TRUE(s.ok()) << s;
    done = true;
  });
  ASSERT_TRUE(done);
  EXPECT_TRUE(response.data().empty());
  EXPECT_EQ(response.version(), 0);
  EXPECT_EQ(held.pieces.size(), 2u);
  const std::vector<float> expected(v0.data.begin() + 1000, v0.data.begin() + 400000);
  EXPECT_EQ(joined(held), expected);

  // A dense push, a row push and an assign, all while the pull holds the blocks.
  ASSERT_TRUE(Push(*store, "big", 1, std::vector<float>(kRows, 1.0f)).ok());
  ASSERT_TRUE(PushRows(*store, "big", 2, {5000, 300000}, {2.0f, 2.0f}).ok());
  AssignRequest assign;
  assign.set_request_id(3);
  assign.set_shard("big");
  assign.set_row_begin(2000);
  assign.set_row_end(2001);
  assign.set_data(Bytes({42.0f}));
  AssignResponse assigned;
  ASSERT_TRUE(store->Assign(assign, &assigned).ok());
  EXPECT_EQ(joined(held), expected) << "a held block changed";

  const Snapshot v2 = PullAll(*store, "big");
  EXPECT_EQ(v2.version, 2);
  for (int64_t r : {int64_t{0}, int64_t{1000}, kRows - 1}) {
    EXPECT_EQ(v2.data[r], v0.data[r] - 0.5f) << r;
  }
  EXPECT_EQ(v2.data[5000], v0.data[5000] - 0.5f - 1.0f);
  EXPECT_EQ(v2.data[2000], 42.0f);

  // Waiting in place: filled by the push that reaches version 3, with that version's bytes.
  range.set_min_version(3);
  ShardStore::PulledBytes waited;
  done = false;
  store->Pull(range, &response, &waited, [&](const absl::Status& s) {
    EXPECT_TRUE(s.ok()) << s;
    done = true;
  });
  EXPECT_FALSE(done);
  ASSERT_TRUE(Push(*store, "big", 4, std::vector<float>(kRows, 2.0f)).ok());
  ASSERT_TRUE(done);
  EXPECT_EQ(response.version(), 3);
  const std::vector<float> got = joined(waited);
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); i += 997) EXPECT_EQ(got[i], v2.data[1000 + i] - 1.0f) << i;
  EXPECT_EQ(joined(held), expected);
}

// Pulls, in place and copied, racing with pushes and row pushes on a shard of three blocks:
// every pull sees one version everywhere, never part of an update, and a pull in place keeps
// seeing it while updates go on (every update adds exactly 1 to the rows it touches).
TEST(ShardStoreTest, ConcurrentPullsNeverSeeHalfAnUpdate) {
  auto store = NewStore();
  constexpr int64_t kRows = 3 << 18;  // 3 MiB of one-float rows: three blocks
  ASSERT_TRUE(Create(*store, {Spec("c", {kRows}, Sgd(1.0), Constant(0))}).ok());
  constexpr int kPushes = 60;
  std::atomic<int> pushers_left{2};
  std::atomic<uint64_t> next_id{1};
  std::vector<std::thread> threads;
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&] {
      const std::vector<float> minus_one(kRows, -1.0f);
      for (int i = 0; i < kPushes; ++i) EXPECT_TRUE(Push(*store, "c", next_id++, minus_one).ok());
      --pushers_left;
    });
  }
  std::atomic<int> checked{0};
  for (int t = 0; t < 2; ++t) {
    threads.emplace_back([&, t] {
      PullRequest request;
      request.set_shard("c");
      while (pushers_left.load() > 0) {
        PullResponse response;
        std::vector<float> values;
        ShardStore::PulledBytes held;
        absl::Status status = absl::InternalError("not done");
        if (t == 0) {
          store->Pull(request, &response, &held, [&](const absl::Status& s) { status = s; });
        } else {
          status = PullNow(*store, request, &response);
        }
        ASSERT_TRUE(status.ok()) << status;
        absl::SleepFor(absl::Microseconds(200));  // updates go on while the pull holds
        if (t == 0) {
          for (absl::string_view p : held.pieces) {
            const std::vector<float> part = Floats(std::string(p));
            values.insert(values.end(), part.begin(), part.end());
          }
        } else {
          values = Floats(response.data());
        }
        ASSERT_EQ(values.size(), static_cast<size_t>(kRows));
        const float expected = static_cast<float>(response.version());
        for (int64_t i = 0; i < kRows; i += 4099) {
          ASSERT_EQ(values[i], expected) << "element " << i << " of a pull at version "
                                         << response.version();
        }
        ASSERT_EQ(values[kRows - 1], expected);
        ++checked;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GT(checked.load(), 0);
  const Snapshot last = PullAll(*store, "c");
  EXPECT_EQ(last.version, 2 * kPushes);
  EXPECT_EQ(last.data[kRows / 2], static_cast<float>(2 * kPushes));
}

TEST(ShardStoreTest, ShardsOfAVariableMatchTheWholeVariable) {
  auto store = NewStore();
  ShardSpec whole = Spec("whole", {13, 7});
  whole.set_variable("v");
  std::vector<ShardSpec> specs = {whole};
  int64_t offset = 0;
  int part = 0;
  for (int64_t rows : {5, 5, 3}) {
    ShardSpec s = Spec("v/part_" + std::to_string(part), {rows, 7});
    s.set_variable("v");
    s.set_part(part++);
    s.set_num_parts(3);
    s.set_row_offset(offset);
    s.mutable_full_shape()->set_dim(0, 13);
    offset += rows;
    specs.push_back(s);
  }
  ASSERT_TRUE(Create(*store, specs).ok());
  std::vector<float> joined;
  for (int p = 0; p < 3; ++p) {
    const Snapshot s = PullAll(*store, "v/part_" + std::to_string(p));
    joined.insert(joined.end(), s.data.begin(), s.data.end());
  }
  EXPECT_EQ(Bytes(joined), Bytes(PullAll(*store, "whole").data));

  ListShardsRequest list;
  list.set_variable("v");
  ListShardsResponse listed;
  ASSERT_TRUE(store->ListShards(list, &listed).ok());
  EXPECT_EQ(listed.shards_size(), 4);
  EXPECT_EQ(listed.shards(0).bytes(), 5 * 7 * 4);  // SGD: no slots
}

// Updates of a million floats are split over helper threads; small shards never are. The
// same pushes to a whole variable and to its 16 small shards must give the same bits.
TEST(ShardStoreTest, LargeUpdatesSplitOverThreadsAreBitIdentical) {
  constexpr int64_t kRows = 2048, kWidth = 512, kParts = 16, kPartRows = kRows / kParts;
  auto store = NewStore();
  OptimizerSpec adam = Adam();
  ShardSpec whole = Spec("whole", {kRows, kWidth}, adam);
  whole.set_variable("v");
  std::vector<ShardSpec> specs = {whole};
  for (int p = 0; p < kParts; ++p) {
    ShardSpec s = Spec("v/part_" + std::to_string(p), {kPartRows, kWidth}, adam);
    s.set_variable("v");
    s.set_part(p);
    s.set_num_parts(kParts);
    s.set_row_offset(p * kPartRows);
    s.mutable_full_shape()->set_dim(0, kRows);
    specs.push_back(s);
  }
  ASSERT_TRUE(Create(*store, specs).ok());
  uint64_t id = 0;
  for (int step = 0; step < 3; ++step) {
    const std::vector<float> grad = Ramp(kRows * kWidth, 0.1f, step);
    ASSERT_TRUE(Push(*store, "whole", ++id, grad).ok());
    for (int p = 0; p < kParts; ++p) {
      std::vector<float> part(grad.begin() + p * kPartRows * kWidth,
                              grad.begin() + (p + 1) * kPartRows * kWidth);
      ASSERT_TRUE(Push(*store, "v/part_" + std::to_string(p), id, part).ok());
    }
  }
  // Row pushes: every other row, in descending order.
  std::vector<int64_t> ids;
  for (int64_t r = kRows - 1; r >= 0; r -= 2) ids.push_back(r);
  const std::vector<float> rows = Ramp(ids.size() * kWidth, 0.2f, 9);
  ASSERT_TRUE(PushRows(*store, "whole", ++id, ids, rows).ok());
  for (int p = 0; p < kParts; ++p) {
    std::vector<int64_t> local;
    std::vector<float> part;
    for (size_t k = 0; k < ids.size(); ++k) {
      if (ids[k] / kPartRows != p) continue;
      local.push_back(ids[k] - p * kPartRows);
      part.insert(part.end(), rows.begin() + k * kWidth, rows.begin() + (k + 1) * kWidth);
    }
    ASSERT_TRUE(PushRows(*store, "v/part_" + std::to_string(p), id, local, part).ok());
  }
  std::vector<float> joined;
  for (int p = 0; p < kParts; ++p) {
    const Snapshot s = PullAll(*store, "v/part_" + std::to_string(p));
    joined.insert(joined.end(), s.data.begin(), s.data.end());
  }
  const Snapshot w = PullAll(*store, "whole");
  EXPECT_EQ(w.version, 4);
  EXPECT_TRUE(Bytes(joined) == Bytes(w.data)) << "split updates differ from unsplit ones";
}

TEST(ShardStoreTest, RankZeroVariableIsOneValue) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("step", {}, Sgd(), Constant(3))}).ok());
  ASSERT_TRUE(Push(*store, "step", 1, {1.0f}).ok());
  PullRequest request;
  request.set_shard("step");
  PullResponse response;
  ASSERT_TRUE(PullNow(*store, request, &response).ok());
  EXPECT_EQ(Floats(response.data()), std::vector<float>{2.0f});
  EXPECT_EQ(response.shape().dim_size(), 0);
  EXPECT_EQ(response.version(), 1);
}

TEST(ShardStoreTest, BadRequestsChangeNothingAndNameTheShard) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {4, 3}, Adam()), SyncSpec("s", {2, 2}, 2)}).ok());
  const std::vector<float> good(12, 0.5f);
  std::vector<float> nan = good;
  nan[7] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> inf = good;
  inf[2] = -std::numeric_limits<float>::infinity();

  struct Case {
    std::string label;
    std::function<absl::Status()> run;
    absl::StatusCode code;
    std::vector<std::string> needles;
  };
  uint64_t id = 100;
  std::vector<Case> cases = {
      {"unknown shard", [&] { return Push(*store, "nope", ++id, good); },
       absl::StatusCode::kNotFound, {"'nope'"}},
      {"short data", [&] { return Push(*store, "w", ++id, std::vector<float>(11, 1)); },
       absl::StatusCode::kInvalidArgument, {"'w'", "44 bytes", "expected 48"}},
      {"range data", [&] { return Push(*store, "w", ++id, good, 1, 3); },
       absl::StatusCode::kInvalidArgument, {"'w'", "expected 24"}},
      {"nan", [&] { return Push(*store, "w", ++id, nan); },
       absl::StatusCode::kInvalidArgument, {"'w'", "[7]"}},
      {"inf", [&] { return Push(*store, "w", ++id, inf); },
       absl::StatusCode::kInvalidArgument, {"'w'", "[2]"}},
      {"request id 0", [&] { return Push(*store, "w", 0, good); },
       absl::StatusCode::kInvalidArgument, {"'w'", "request_id"}},
      {"empty range", [&] { return Push(*store, "w", ++id, {}, 2, 2); },
       absl::StatusCode::kInvalidArgument, {"'w'", "row range"}},
      {"range past end", [&] { return Push(*store, "w", ++id, good, 0, 5); },
       absl::StatusCode::kInvalidArgument, {"'w'", "4 rows"}},
      {"negative begin", [&] { return Push(*store, "w", ++id, good, -1, 3); },
       absl::StatusCode::kInvalidArgument, {"'w'"}},
      {"row id out of range",
       [&] { return PushRows(*store, "w", ++id, {1, 4}, std::vector<float>(6, 1)); },
       absl::StatusCode::kInvalidArgument, {"'w'", "ids[1] = 4", "4 rows"}},
      {"negative row id",
       [&] { return PushRows(*store, "w", ++id, {-1}, std::vector<float>(3, 1)); },
       absl::StatusCode::kInvalidArgument, {"'w'", "ids[0]"}},
      {"rows data size", [&] { return PushRows(*store, "w", ++id, {1, 2}, {1, 2, 3}); },
       absl::StatusCode::kInvalidArgument, {"'w'", "expected 24"}},
      {"rows nan",
       [&] { return PushRows(*store, "w", ++id, {1}, {1, std::nanf(""), 3}); },
       absl::StatusCode::kInvalidArgument, {"'w'", "[1]"}},
      {"rows request id 0", [&] { return PushRows(*store, "w", 0, {1}, {1, 2, 3}); },
       absl::StatusCode::kInvalidArgument, {"'w'", "request_id"}},
      {"assign size",
       [&] {
         AssignRequest r;
         r.set_request_id(++id);
         r.set_shard("w");
         r.set_data(Bytes({1, 2}));
         AssignResponse resp;
         return store->Assign(r, &resp);
       },
       absl::StatusCode::kInvalidArgument, {"'w'", "expected 48"}},
      {"assign request id 0",
       [&] {
         AssignRequest r;
         r.set_shard("w");
         r.set_data(Bytes(good));
         AssignResponse resp;
         return store->Assign(r, &resp);
       },
       absl::StatusCode::kInvalidArgument, {"'w'", "request_id"}},
      {"assign inf",
       [&] {
         AssignRequest r;
         r.set_request_id(++id);
         r.set_shard("w");
         r.set_data(Bytes(inf));
         AssignResponse resp;
         return store->Assign(r, &resp);
       },
       absl::StatusCode::kInvalidArgument, {"'w'", "[2]"}},
      {"pull range",
       [&] {
         PullRequest r;
         r.set_shard("w");
         r.set_row_begin(3);
         r.set_row_end(2);
         PullResponse resp;
         return PullNow(*store, r, &resp);
       },
       absl::StatusCode::kInvalidArgument, {"'w'", "row range"}},
      {"pull unknown",
       [&] {
         PullRequest r;
         r.set_shard("nope");
         PullResponse resp;
         return PullNow(*store, r, &resp);
       },
       absl::StatusCode::kNotFound, {"'nope'"}},
      {"pull rows id",
       [&] {
         PullRowsRequest r;
         r.set_shard("w");
         r.add_ids(0);
         r.add_ids(9);
         PullRowsResponse resp;
         absl::Status st;
         store->PullRows(r, &resp, [&](const absl::Status& s) { st = s; });
         return st;
       },
       absl::StatusCode::kInvalidArgument, {"'w'", "ids[1] = 9", "4 rows"}},
      {"sync stale step",
       [&] { return Push(*store, "s", ++id, {1, 2, 3, 4}, 0, 0, nullptr, -1, 0); },
       absl::StatusCode::kAborted, {"'s'", "stale step"}},
      {"sync future step",
       [&] { return Push(*store, "s", ++id, {1, 2, 3, 4}, 0, 0, nullptr, 1, 0); },
       absl::StatusCode::kFailedPrecondition, {"'s'"}},
      {"sync bad replica",
       [&] { return Push(*store, "s", ++id, {1, 2, 3, 4}, 0, 0, nullptr, 0, 2); },
       absl::StatusCode::kInvalidArgument, {"'s'", "replica"}},
      {"sync rows bad replica",
       [&] { return PushRows(*store, "s", ++id, {0}, {1, 2}, nullptr, 0, -1); },
       absl::StatusCode::kInvalidArgument, {"'s'", "replica"}},
  };
  for (const Case& c : cases) {
    const Snapshot w_before = PullAll(*store, "w");
    const Snapshot s_before = PullAll(*store, "s");
    const absl::Status status = c.run();
    EXPECT_EQ(status.code(), c.code) << c.label << ": " << status;
    for (const std::string& needle : c.needles) {
      EXPECT_TRUE(absl::StrContains(status.message(), needle))
          << c.label << ": '" << needle << "' not in: " << status;
    }
    const Snapshot w_after = PullAll(*store, "w");
    const Snapshot s_after = PullAll(*store, "s");
    EXPECT_EQ(Bytes(w_before.data), Bytes(w_after.data)) << c.label;
    EXPECT_EQ(w_before.version, w_after.version) << c.label;
    EXPECT_EQ(Bytes(s_before.data), Bytes(s_after.data)) << c.label;
    EXPECT_EQ(s_before.version, s_after.version) << c.label;
  }
  // Nothing was half-accumulated on the SYNC shard either: two good pushes make one step.
  PushResponse r;
  ASSERT_TRUE(Push(*store, "s", ++id, {1, 1, 1, 1}, 0, 0, &r, 0, 0).ok());
  EXPECT_FALSE(r.applied());
  ASSERT_TRUE(Push(*store, "s", ++id, {1, 1, 1, 1}, 0, 0, &r, 0, 1).ok());
  EXPECT_TRUE(r.applied());
  EXPECT_EQ(r.version(), 1);
}

TEST(ShardStoreTest, DuplicateRequestIdIsAppliedOnce) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {2, 2}, Sgd(), Constant(0))}).ok());
  PushResponse r;
  ASSERT_TRUE(Push(*store, "w", 7, {1, 1, 1, 1}, 0, 0, &r).ok());
  EXPECT_FALSE(r.duplicate());
  EXPECT_TRUE(r.applied());
  ASSERT_TRUE(Push(*store, "w", 7, {1, 1, 1, 1}, 0, 0, &r).ok());
  EXPECT_TRUE(r.duplicate());
  EXPECT_FALSE(r.applied());
  EXPECT_EQ(r.version(), 1);

  PushRowsResponse rr;
  ASSERT_TRUE(PushRows(*store, "w", 8, {1}, {1, 1}, &rr).ok());
  ASSERT_TRUE(PushRows(*store, "w", 8, {1}, {1, 1}, &rr).ok());
  EXPECT_TRUE(rr.duplicate());

  AssignRequest assign;
  assign.set_request_id(9);
  assign.set_shard("w");
  assign.set_row_begin(0);
  assign.set_row_end(1);
  assign.set_data(Bytes({5, 5}));
  AssignResponse ar;
  ASSERT_TRUE(store->Assign(assign, &ar).ok());
  EXPECT_FALSE(ar.duplicate());
  ASSERT_TRUE(Push(*store, "w", 10, {1, 1}, 0, 1).ok());
  ASSERT_TRUE(store->Assign(assign, &ar).ok());  // a retried assign must not undo the push
  EXPECT_TRUE(ar.duplicate());

  const Snapshot s = PullAll(*store, "w");
  EXPECT_EQ(s.data, (std::vector<float>{4, 4, -2, -2}));
  EXPECT_EQ(s.version, 3);  // two pushes and one push-rows; assign keeps the version
}

TEST(ShardStoreTest, RequestIdWindowEvictsOldestFirst) {
  auto store = NewStore(/*window=*/2);
  ASSERT_TRUE(Create(*store, {Spec("w", {1}, Sgd(), Constant(0))}).ok());
  PushResponse r;
  for (uint64_t id : {1, 2, 3}) ASSERT_TRUE(Push(*store, "w", id, {1}, 0, 0, &r).ok());
  ASSERT_TRUE(Push(*store, "w", 3, {1}, 0, 0, &r).ok());
  EXPECT_TRUE(r.duplicate());
  ASSERT_TRUE(Push(*store, "w", 1, {1}, 0, 0, &r).ok());  // evicted: applied again
  EXPECT_FALSE(r.duplicate());
  EXPECT_EQ(PullAll(*store, "w").data, std::vector<float>{-4});
}

TEST(ShardStoreTest, PushRowsSumsDuplicateIdsBeforeOneUpdate) {
  OptimizerSpec adagrad;
  adagrad.set_type(OptimizerSpec::ADAGRAD);
  adagrad.set_learning_rate(0.5);
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("e", {4, 2}, adagrad, Constant(1)),
                              Spec("ref", {4, 2}, adagrad, Constant(1))})
                  .ok());
  ASSERT_TRUE(PushRows(*store, "e", 1, {2, 0, 2}, {1, 2, 3, 4, 5, 6}).ok());
  // The same update with the duplicates summed by hand, in order of appearance.
  ASSERT_TRUE(PushRows(*store, "ref", 1, {2, 0}, {1 + 5, 2 + 6, 3, 4}).ok());
  const Snapshot e = PullAll(*store, "e");
  EXPECT_EQ(Bytes(e.data), Bytes(PullAll(*store, "ref").data));
  EXPECT_EQ(e.data[2], 1.0f);  // row 1 untouched
  EXPECT_EQ(e.version, 1);
}

// The same on a shard whose rows are many next to the ids (duplicates then go through a hash
// map rather than a bitmap of the rows), and with many ids, most of them unique.
// ids_bytes: raw little-endian int64s.
std::string IdBytes(const std::vector<int64_t>& ids) {
  std::string s(ids.size() * sizeof(int64_t), '\0');
  if (!ids.empty()) std::memcpy(&s[0], ids.data(), s.size());
  return s;
}

// The same row calls with the ids as the packed `ids` field (older clients) and as
// `ids_bytes` give identical replies and identical updates.
TEST(ShardStoreTest, RowIdsAsBytesAndAsPackedIdsGiveTheSameResults) {
  auto old_form = NewStore();
  auto new_form = NewStore();
  for (auto* store : {old_form.get(), new_form.get()}) {
    ASSERT_TRUE(Create(*store, {Spec("e", {50, 3}, Adam())}).ok());
  }
  const std::vector<int64_t> ids = {7, 0, 49, 7, 13, 7, 2};
  const std::vector<float> grad = Ramp(ids.size() * 3, 0.5f);
  for (int form = 0; form < 2; ++form) {
    ShardStore* store = form == 0 ? old_form.get() : new_form.get();
    PushRowsRequest push;
    push.set_request_id(11);
    push.set_shard("e");
    if (form == 0) {
      for (int64_t id : ids) push.add_ids(id);
    } else {
      push.set_ids_bytes(IdBytes(ids));
    }
    push.set_data(Bytes(grad));
    PushRowsResponse pushed;
    ASSERT_TRUE(store->PushRows(push, &pushed).ok());
    EXPECT_EQ(pushed.version(), 1);
  }
  EXPECT_EQ(PullAll(*old_form, "e").data, PullAll(*new_form, "e").data);

  std::string replies[2];
  for (int form = 0; form < 2; ++form) {
    PullRowsRequest pull;
    pull.set_shard("e");
    if (form == 0) {
      for (int64_t id : ids) pull.add_ids(id);
    } else {
      pull.set_ids_bytes(IdBytes(ids));
    }
    PullRowsResponse response;
    absl::Status status;
    (form == 0 ? old_form : new_form)->PullRows(pull, &response,
                                                 [&](const absl::Status& s) { status = s; });
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_EQ(response.version(), 1);
    replies[form] = response.data();
  }
  EXPECT_EQ(replies[0].size(), ids.size() * 3 * sizeof(float));
  EXPECT_EQ(replies[0], replies[1]);
}

TEST(ShardStoreTest, BadRowIdsBytesAreRefusedNamingTheFieldAndChangeNothing) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("e", {10, 2})}).ok());
  const Snapshot before = PullAll(*store, "e");

  // Not whole int64s.
  PushRowsRequest push;
  push.set_request_id(5);
  push.set_shard("e");
  push.set_ids_bytes(std::string(12, '\0'));
  push.set_data(Bytes({1, 2, 3, 4}));
  PushRowsResponse pushed;
  absl::Status s = store->PushRows(push, &pushed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ids_bytes has 12 bytes, not a multiple of 8")) << s;

  // Both forms at once.
  push.set_ids_bytes(IdBytes({1}));
  push.add_ids(1);
  push.set_data(Bytes({1, 2}));
  s = store->PushRows(push, &pushed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "both ids")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ids_bytes")) << s;

  // An id out of range, given as bytes, is named as the packed ids' are.
  push.clear_ids();
  push.set_ids_bytes(IdBytes({10}));
  s = store->PushRows(push, &pushed);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ids[0] = 10")) << s;

  PullRowsRequest pull;
  pull.set_shard("e");
  pull.set_ids_bytes(std::string(9, '\0'));
  PullRowsResponse response;
  store->PullRows(pull, &response, [&](const absl::Status& st) { s = st; });
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "ids_bytes has 9 bytes")) << s;

  const Snapshot after = PullAll(*store, "e");
  EXPECT_EQ(after.data, before.data);
  EXPECT_EQ(after.version, before.version);
  // The refused request id was not remembered: the same id with good ids is applied.
  push.set_ids_bytes(IdBytes({1}));
  ASSERT_TRUE(store->PushRows(push, &pushed).ok());
  EXPECT_FALSE(pushed.duplicate());
  EXPECT_EQ(pushed.version(), 1);
}

TEST(ShardStoreTest, PushRowsSumsDuplicatesOnLargeAndSmallShards) {
  OptimizerSpec adagrad;
  adagrad.set_type(OptimizerSpec::ADAGRAD);
  adagrad.set_learning_rate(0.5);
  for (int64_t rows : {int64_t{1} << 20, int64_t{4096}}) {
    SCOPED_TRACE(rows);
    auto store = NewStore();
    ASSERT_TRUE(Create(*store, {Spec("e", {rows, 2}, adagrad, Constant(1)),
                                Spec("ref", {rows, 2}, adagrad, Constant(1))})
                    .ok());
    std::vector<int64_t> ids = {7, rows - 1, 7, 3, rows - 1, 7};
    for (int64_t i = 0; i < 300; ++i) ids.push_back((i * 37) % 1000 + 10);  // some repeat
    const std::vector<float> grad = Ramp(ids.size() * 2);
    ASSERT_TRUE(PushRows(*store, "e", 1, ids, grad).ok());
    // By hand: each distinct id once, its rows summed in order of appearance.
    std::vector<int64_t> unique;
    std::vector<float> summed;
    for (size_t k = 0; k < ids.size(); ++k) {
      auto it = std::find(unique.begin(), unique.end(), ids[k]);
      const size_t p = it - unique.begin();
      if (it == unique.end()) {
        unique.push_back(ids[k]);
        summed.push_back(grad[2 * k]);
        summed.push_back(grad[2 * k + 1]);
      } else {
        summed[2 * p] += grad[2 * k];
        summed[2 * p + 1] += grad[2 * k + 1];
      }
    }
    ASSERT_TRUE(PushRows(*store, "ref", 1, unique, summed).ok());
    EXPECT_TRUE(Bytes(PullAll(*store, "e").data) == Bytes(PullAll(*store, "ref").data));
  }
}

TEST(ShardStoreTest, MinVersionWaitsForAPushFromAnotherThread) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {3}, Sgd(), Constant(0))}).ok());
  PullRequest request;
  request.set_shard("w");
  request.set_min_version(2);
  PullResponse response;
  absl::Notification done;
  absl::Status status;
  PullResponse nested;
  store->Pull(request, &response, [&](const absl::Status& s) {
    status = s;
    // Re-entering the store from `done` must not deadlock: no store lock is held.
    PullRequest again;
    again.set_shard("w");
    store->Pull(again, &nested, [](const absl::Status& s2) { EXPECT_TRUE(s2.ok()); });
    done.Notify();
  });
  EXPECT_FALSE(done.HasBeenNotified());
  std::thread pusher([&] {
    EXPECT_TRUE(Push(*store, "w", 1, {1, 1, 1}).ok());
    EXPECT_FALSE(done.HasBeenNotified());
    EXPECT_TRUE(Push(*store, "w", 2, {1, 2, 3}).ok());
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  pusher.join();
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(response.version(), 2);
  EXPECT_EQ(Floats(response.data()), (std::vector<float>{-2, -3, -4}));
  EXPECT_EQ(nested.version(), 2);
}

TEST(ShardStoreTest, PullRowsWaitsToo) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("e", {3, 2}, Sgd(), Constant(0))}).ok());
  absl::Notification done;
  absl::Status status;
  PullRowsResponse response;
  {
    PullRowsRequest request;  // destroyed before the wait completes
    request.set_shard("e");
    request.add_ids(2);
    request.add_ids(0);
    request.set_min_version(1);
    store->PullRows(request, &response, [&](const absl::Status& s) {
      status = s;
      done.Notify();
    });
  }
  EXPECT_FALSE(done.HasBeenNotified());
  ASSERT_TRUE(PushRows(*store, "e", 1, {2}, {1, 2}).ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(Floats(response.data()), (std::vector<float>{-1, -2, 0, 0}));
  EXPECT_EQ(response.version(), 1);
}

TEST(ShardStoreTest, WaitTimesOutWithDeadlineExceeded) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {3})}).ok());
  PullRequest request;
  request.set_shard("w");
  request.set_min_version(1);
  request.set_wait_timeout_ms(50);
  PullResponse response;
  absl::Notification done;
  absl::Status status;
  const absl::Time start = absl::Now();
  store->Pull(request, &response, [&](const absl::Status& s) {
    status = s;
    done.Notify();
  });
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(45));
  EXPECT_EQ(status.code(), absl::StatusCode::kDeadlineExceeded) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), "'w'")) << status;
  EXPECT_TRUE(response.data().empty());

  // An earlier deadline registered after a later one still fires first.
  request.set_wait_timeout_ms(60000);
  absl::Notification long_done;
  store->Pull(request, &response, [&](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
    long_done.Notify();
  });
  request.set_wait_timeout_ms(20);
  absl::Notification short_done;
  store->Pull(request, &response, [&](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
    short_done.Notify();
  });
  ASSERT_TRUE(short_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(long_done.HasBeenNotified());
  store.reset();  // the destructor cancels the long wait
  EXPECT_TRUE(long_done.HasBeenNotified());
}

TEST(ShardStoreTest, ShutdownCancelsWaitersAndLaterWaits) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {3})}).ok());
  PullRequest request;
  request.set_shard("w");
  request.set_min_version(5);
  std::atomic<int> cancelled{0};
  PullResponse r1, r2, r3;
  auto expect_cancelled = [&](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "'w'")) << s;
    ++cancelled;
  };
  store->Pull(request, &r1, expect_cancelled);
  request.set_wait_timeout_ms(100000);
  store->Pull(request, &r2, expect_cancelled);
  EXPECT_EQ(cancelled.load(), 0);
  store->Shutdown();
  EXPECT_EQ(cancelled.load(), 2);
  store->Pull(request, &r3, expect_cancelled);
  EXPECT_EQ(cancelled.load(), 3);
  store->Shutdown();  // idempotent

  // A pull that needs no wait is still answered.
  EXPECT_EQ(PullAll(*store, "w").data.size(), 3u);
  HealthResponse health;
  store->Health(&health);
  EXPECT_NE(health.status(), "SERVING");
}

// Pushes a step on a SYNC shard of 3 replicas in the given arrival order. Replica 1 sends
// its gradient as two row-range chunks.
std::string RunSyncStep(const std::vector<int>& order, bool chunk_first_half_last) {
  auto store = NewStore();
  EXPECT_TRUE(Create(*store, {SyncSpec("s", {5, 3}, 3)}).ok());
  std::vector<std::vector<float>> grads;
  for (int r = 0; r < 3; ++r) grads.push_back(Ramp(15, std::pow(10.0f, r - 1), r));
  uint64_t id = 1;
  int applied = 0;
  for (int replica : order) {
    PushResponse response;
    if (replica == 1) {
      const std::vector<float> head(grads[1].begin(), grads[1].begin() + 6);
      const std::vector<float> tail(grads[1].begin() + 6, grads[1].end());
      if (chunk_first_half_last) {
        EXPECT_TRUE(Push(*store, "s", id++, tail, 2, 5, &response, 0, 1).ok());
        applied += response.applied();
        EXPECT_TRUE(Push(*store, "s", id++, head, 0, 2, &response, 0, 1).ok());
      } else {
        EXPECT_TRUE(Push(*store, "s", id++, head, 0, 2, &response, 0, 1).ok());
        applied += response.applied();
        EXPECT_TRUE(Push(*store, "s", id++, tail, 2, 0, &response, 0, 1).ok());
      }
    } else {
      EXPECT_TRUE(Push(*store, "s", id++, grads[replica], 0, 0, &response, 0, replica).ok());
    }
    applied += response.applied();
    EXPECT_EQ(response.version(), applied);
  }
  EXPECT_EQ(applied, 1);
  const Snapshot s = PullAll(*store, "s");
  EXPECT_EQ(s.version, 1);

  // The same update applied once from the sum in replica order, on an ASYNC shard.
  ShardSpec ref = Spec("ref", {5, 3}, Adam());
  ref.set_variable("s");  // the same initial values
  EXPECT_TRUE(Create(*store, {ref}).ok());
  std::vector<float> sum(15);
  for (int i = 0; i < 15; ++i) sum[i] = (grads[0][i] + grads[1][i]) + grads[2][i];
  EXPECT_TRUE(Push(*store, "ref", 1, sum).ok());
  EXPECT_EQ(Bytes(PullAll(*store, "ref").data), Bytes(s.data));
  return Bytes(s.data);
}

TEST(ShardStoreTest, SyncStepSumsReplicasInOrderAndAppliesOnce) {
  const std::string a = RunSyncStep({2, 1, 0}, true);
  const std::string b = RunSyncStep({0, 2, 1}, false);
  const std::string c = RunSyncStep({1, 0, 2}, true);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
}

TEST(ShardStoreTest, SyncReRunsAreDuplicatesDuringAndAfterTheirStep) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {SyncSpec("s", {4}, 2, Sgd())}).ok());
  const Snapshot before = PullAll(*store, "s");
  PushResponse r;
  ASSERT_TRUE(Push(*store, "s", 1, {1, 1}, 0, 2, &r, 0, 0).ok());
  EXPECT_FALSE(r.duplicate());
  // Another worker re-runs replica 0's step: rows already covered change nothing.
  ASSERT_TRUE(Push(*store, "s", 2, {9, 9}, 0, 2, &r, 0, 0).ok());
  EXPECT_TRUE(r.duplicate());
  ASSERT_TRUE(Push(*store, "s", 3, {1, 1}, 2, 0, &r, 0, 0).ok());
  EXPECT_FALSE(r.applied());
  ASSERT_TRUE(Push(*store, "s", 4, {8, 8, 8, 8}, 0, 0, &r, 0, 0).ok());
  EXPECT_TRUE(r.duplicate());
  EXPECT_EQ(Bytes(PullAll(*store, "s").data), Bytes(before.data));
  ASSERT_TRUE(Push(*store, "s", 5, {2, 2, 2, 2}, 0, 0, &r, 0, 1).ok());
  EXPECT_TRUE(r.applied());
  EXPECT_EQ(r.version(), 1);
  const Snapshot after = PullAll(*store, "s");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(after.data[i], before.data[i] - 3.0f);

  // The step is over: a late push of a replica for it (under a request id of its own) is a
  // duplicate, as it was while the step ran, and so is a retry of an applied request.
  ASSERT_TRUE(Push(*store, "s", 6, {1, 1, 1, 1}, 0, 0, &r, 0, 1).ok());
  EXPECT_TRUE(r.duplicate());
  EXPECT_FALSE(r.applied());
  ASSERT_TRUE(Push(*store, "s", 5, {2, 2, 2, 2}, 0, 0, &r, 0, 1).ok());
  EXPECT_TRUE(r.duplicate());
  EXPECT_EQ(PullAll(*store, "s").version, 1);
}

// Backup workers, 2 of 3: the step is applied with the first two replicas, their sum times
// 3 / 2; the third replica's push (here, each of its chunks) is dropped, answered OK with
// nothing changed, not refused as stale; retries of used pushes stay duplicates.
TEST(ShardStoreTest, BackupStepsApplyTheFirstKReplicasAndDropLatePushes) {
  auto store = NewStore();
  ShardSpec spec = SyncSpec("s", {4}, 3, Sgd());
  spec.mutable_update()->set_replicas_to_aggregate(2);
  ASSERT_TRUE(Create(*store, {spec}).ok());
  const Snapshot before = PullAll(*store, "s");
  PushResponse r;
  // Replica 1 sends half its rows, then replicas 2 and 0 complete the step.
  ASSERT_TRUE(Push(*store, "s", 1, {100, 100}, 0, 2, &r, 0, 1).ok());
  EXPECT_FALSE(r.applied());
  ASSERT_TRUE(Push(*store, "s", 2, {1, 2, 3, 4}, 0, 0, &r, 0, 2).ok());
  EXPECT_FALSE(r.applied());
  EXPECT_FALSE(r.dropped());
  ASSERT_TRUE(Push(*store, "s", 3, {3, 2, 1, 0}, 0, 0, &r, 0, 0).ok());
  EXPECT_TRUE(r.applied());
  EXPECT_FALSE(r.dropped());
  EXPECT_EQ(r.version(), 1);
  const Snapshot after = PullAll(*store, "s");
  ASSERT_EQ(after.version, 1);
  // SGD with learning rate 1: minus (4 / 2 replicas) * 3 = 6 per element.
  for (int i = 0; i < 4; ++i) EXPECT_EQ(after.data[i], before.data[i] - 6.0f) << i;

  // Replica 1's other half arrives late: dropped, not an error, nothing changes.
  ASSERT_TRUE(Push(*store, "s", 4, {100, 100}, 2, 4, &r, 0, 1).ok());
  EXPECT_TRUE(r.dropped());
  EXPECT_FALSE(r.applied());
  EXPECT_FALSE(r.duplicate());
  EXPECT_EQ(r.version(), 1);
  // Its retry too (a dropped push is not remembered as applied).
  ASSERT_TRUE(Push(*store, "s", 4, {100, 100}, 2, 4, &r, 0, 1).ok());
  EXPECT_TRUE(r.dropped());
  // Rows as well.
  PushRowsResponse rr;
  ASSERT_TRUE(PushRows(*store, "s", 5, {0}, {50}, &rr, 0, 1).ok());
  EXPECT_TRUE(rr.dropped());
  // A retry of a push the step used is a duplicate, not a drop.
  ASSERT_TRUE(Push(*store, "s", 3, {3, 2, 1, 0}, 0, 0, &r, 0, 0).ok());
  EXPECT_TRUE(r.duplicate());
  EXPECT_FALSE(r.dropped());
  EXPECT_EQ(Bytes(PullAll(*store, "s").data), Bytes(after.data));
  // A checkpoint's snapshot finds no step partly pushed: replica 1's first half went with
  // the step it was left out of.
  SnapshotRequest snapshot;
  snapshot.set_checkpoint_id(1);
  snapshot.set_path(absl::StrCat(::testing::TempDir(), "/backup_snapshot.safetensors"));
  SnapshotResponse snapped;
  EXPECT_TRUE(store->Snapshot(snapshot, &snapped).ok());

  // The next step starts afresh, and a push ahead of the version is still refused.
  EXPECT_EQ(Push(*store, "s", 6, {1, 1, 1, 1}, 0, 0, &r, 2, 0).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(Push(*store, "s", 7, {1, 1, 1, 1}, 0, 0, &r, 1, 1).ok());
  EXPECT_FALSE(r.dropped());
  ASSERT_TRUE(Push(*store, "s", 8, {1, 1, 1, 1}, 0, 0, &r, 1, 2).ok());
  EXPECT_TRUE(r.applied());
  EXPECT_EQ(PullAll(*store, "s").version, 2);
}

// Without backups (replicas_to_aggregate 0 or n) a late push is a re-run's, already in the
// step: a duplicate, not a dropped straggler's.
TEST(ShardStoreTest, AggregatingEveryReplicaAnswersLatePushesAsDuplicates) {
  auto store = NewStore();
  ShardSpec spec = SyncSpec("s", {2}, 2, Sgd());
  spec.mutable_update()->set_replicas_to_aggregate(2);
  ASSERT_TRUE(Create(*store, {spec}).ok());
  PushResponse r;
  ASSERT_TRUE(Push(*store, "s", 1, {1, 1}, 0, 0, &r, 0, 0).ok());
  EXPECT_FALSE(r.applied());
  ASSERT_TRUE(Push(*store, "s", 2, {1, 1}, 0, 0, &r, 0, 1).ok());
  EXPECT_TRUE(r.applied());
  const Snapshot applied = PullAll(*store, "s");
  ASSERT_TRUE(Push(*store, "s", 3, {1, 1}, 0, 0, &r, 0, 1).ok());
  EXPECT_TRUE(r.duplicate());
  EXPECT_FALSE(r.dropped());
  EXPECT_EQ(Bytes(PullAll(*store, "s").data), Bytes(applied.data));
}

// A SYNC shard serves exactly the version a step asks for, including the one before its
// last step: a step re-run after its worker died half-way through its pushes (this ps got
// them and applied the step with the other replicas) computes on what its first run saw.
TEST(ShardStoreTest, SyncShardsServeTheVersionBeforeTheirLastStepExactly) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {SyncSpec("s", {4, 2}, 2, Sgd()), Spec("a", {4, 2})}).ok());
  const Snapshot v0 = PullAll(*store, "s");
  PushResponse r;
  ASSERT_TRUE(Push(*store, "s", 1, std::vector<float>(8, 1.0f), 0, 0, &r, 0, 0).ok());
  ASSERT_TRUE(Push(*store, "s", 2, std::vector<float>(8, 1.0f), 0, 0, &r, 0, 1).ok());
  ASSERT_TRUE(r.applied());
  const Snapshot v1 = PullAll(*store, "s");
  ASSERT_EQ(v1.version, 1);
  ASSERT_NE(Bytes(v1.data), Bytes(v0.data));

  auto exact = [&](int64_t version, PullResponse* response) {
    PullRequest request;
    request.set_shard("s");
    request.set_min_version(version);
    request.set_exact_version(true);
    return PullNow(*store, request, response);
  };
  PullResponse at0, at1;
  ASSERT_TRUE(exact(0, &at0).ok());
  EXPECT_EQ(at0.version(), 0);
  EXPECT_EQ(Floats(at0.data()), v0.data);
  ASSERT_TRUE(exact(1, &at1).ok());
  EXPECT_EQ(Floats(at1.data()), v1.data);
  // In place (sent from the blocks) and by rows, the same.
  PullRequest in_place_request;
  in_place_request.set_shard("s");
  in_place_request.set_exact_version(true);
  PullResponse in_place_response;
  ShardStore::PulledBytes in_place;
  absl::Status in_place_status = absl::UnknownError("not called");
  store->Pull(in_place_request, &in_place_response, &in_place,
              [&](const absl::Status& s) { in_place_status = s; });
  ASSERT_TRUE(in_place_status.ok()) << in_place_status;
  std::string joined;
  for (absl::string_view piece : in_place.pieces) joined.append(piece.data(), piece.size());
  EXPECT_EQ(joined, Bytes(v0.data));
  PullRowsRequest rows;
  rows.set_shard("s");
  rows.add_ids(3);
  rows.set_exact_version(true);
  PullRowsResponse rows_response;
  absl::Status rows_status = absl::UnknownError("not called");
  store->PullRows(rows, &rows_response, [&](const absl::Status& s) { rows_status = s; });
  ASSERT_TRUE(rows_status.ok()) << rows_status;
  EXPECT_EQ(Floats(rows_response.data()),
            std::vector<float>(v0.data.begin() + 6, v0.data.begin() + 8));
  EXPECT_EQ(rows_response.version(), 0);

  // A second step: version 0 is gone (FAILED_PRECONDITION naming it), 1 is served.
  ASSERT_TRUE(Push(*store, "s", 3, std::vector<float>(8, 1.0f), 0, 0, &r, 1, 0).ok());
  ASSERT_TRUE(Push(*store, "s", 4, std::vector<float>(8, 1.0f), 0, 0, &r, 1, 1).ok());
  PullResponse gone;
  const absl::Status s0 = exact(0, &gone);
  EXPECT_EQ(s0.code(), absl::StatusCode::kFailedPrecondition) << s0;
  EXPECT_NE(s0.message().find("version 0"), std::string::npos) << s0;
  ASSERT_TRUE(exact(1, &at1).ok());
  EXPECT_EQ(Floats(at1.data()), v1.data);
  // A version ahead waits (it is served once reached).
  PullRequest ahead;
  ahead.set_shard("s");
  ahead.set_min_version(3);
  ahead.set_exact_version(true);
  PullResponse ahead_response;
  absl::Status ahead_status = absl::UnknownError("waiting");
  store->Pull(ahead, &ahead_response, [&](const absl::Status& s) { ahead_status = s; });
  EXPECT_EQ(ahead_status.code(), absl::StatusCode::kUnknown);
  ASSERT_TRUE(Push(*store, "s", 5, std::vector<float>(8, 1.0f), 0, 0, &r, 2, 0).ok());
  ASSERT_TRUE(Push(*store, "s", 6, std::vector<float>(8, 1.0f), 0, 0, &r, 2, 1).ok());
  EXPECT_TRUE(ahead_status.ok()) << ahead_status;
  EXPECT_EQ(ahead_response.version(), 3);

  // An ASYNC shard holds only its current version.
  ASSERT_TRUE(Push(*store, "a", 7, std::vector<float>(8, 1.0f)).ok());
  PullRequest async_request;
  async_request.set_shard("a");
  async_request.set_exact_version(true);
  PullResponse async_response;
  EXPECT_EQ(PullNow(*store, async_request, &async_response).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStoreTest, SyncRowsOnlyAndMixedSteps) {
  auto store = NewStore();
  ShardSpec ref = Spec("ref", {6, 2}, Adam());
  ref.set_variable("rows");  // the same initial values
  ASSERT_TRUE(
      Create(*store, {SyncSpec("rows", {6, 2}, 2), SyncSpec("mixed", {6, 2}, 2), ref}).ok());
  // Rows only: replica 1 arrives first; one of its ids repeats.
  PushRowsResponse rr;
  ASSERT_TRUE(PushRows(*store, "rows", 1, {4, 1, 4}, {1, 2, 3, 4, 5, 6}, &rr, 0, 1).ok());
  EXPECT_FALSE(rr.applied());
  ASSERT_TRUE(PushRows(*store, "rows", 2, {1, 4}, {1, 1, 1, 1}, &rr, 0, 1).ok());
  EXPECT_TRUE(rr.duplicate());  // replica 1 already sent its rows for step 0
  ASSERT_TRUE(PushRows(*store, "rows", 3, {0, 1}, {7, 8, 9, 10}, &rr, 0, 0).ok());
  EXPECT_TRUE(rr.applied());
  // Reference: per row, replica 0's gradient + replica 1's summed rows.
  ASSERT_TRUE(PushRows(*store, "ref", 1, {0, 1, 4},
                       {7, 8, 9.0f + 3, 10.0f + 4, 1.0f + 5, 2.0f + 6})
                  .ok());
  const Snapshot rows = PullAll(*store, "rows");
  EXPECT_EQ(Bytes(rows.data), Bytes(PullAll(*store, "ref").data));
  EXPECT_EQ(rows.version, 1);

  // Mixed: replica 0 dense, replica 1 rows; an empty PushRows still completes a replica.
  std::vector<float> dense = Ramp(12);
  PushResponse r;
  ASSERT_TRUE(PushRows(*store, "mixed", 4, {}, {}, &rr, 0, 1).ok());
  EXPECT_FALSE(rr.applied());
  ASSERT_TRUE(Push(*store, "mixed", 5, dense, 0, 0, &r, 0, 0).ok());
  EXPECT_TRUE(r.applied());
  ShardSpec ref2 = Spec("ref2", {6, 2}, Adam());
  ref2.set_variable("mixed");
  ASSERT_TRUE(Create(*store, {ref2}).ok());
  ASSERT_TRUE(Push(*store, "ref2", 1, dense).ok());
  EXPECT_EQ(Bytes(PullAll(*store, "mixed").data), Bytes(PullAll(*store, "ref2").data));

  // A replica that began with dense chunks cannot switch to PushRows within a step.
  ASSERT_TRUE(Push(*store, "mixed", 6, {1, 1}, 0, 1, &r, 1, 0).ok());
  EXPECT_EQ(PushRows(*store, "mixed", 7, {2}, {1, 1}, &rr, 1, 0).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStoreTest, AssignOverwritesAndResetsSlots) {
  OptimizerSpec momentum;
  momentum.set_type(OptimizerSpec::MOMENTUM);
  momentum.set_learning_rate(1);
  momentum.set_momentum(0.5);
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {2, 1}, momentum, Constant(0))}).ok());
  ASSERT_TRUE(Push(*store, "w", 1, {1, 1}).ok());  // v = -1, p = -1
  AssignRequest assign;
  assign.set_request_id(2);
  assign.set_shard("w");
  assign.set_row_begin(1);
  assign.set_data(Bytes({10}));
  assign.set_reset_slots(true);
  AssignResponse ar;
  ASSERT_TRUE(store->Assign(assign, &ar).ok());
  EXPECT_EQ(ar.version(), 1);
  ASSERT_TRUE(Push(*store, "w", 3, {1, 1}).ok());
  // Row 0 keeps its velocity: v = -1.5, p = -2.5. Row 1 starts over: v = -1, p = 9.
  EXPECT_EQ(PullAll(*store, "w").data, (std::vector<float>{-2.5f, 9.0f}));
}

TEST(ShardStoreTest, ConcurrentPushesLoseNoUpdate) {
  constexpr int kThreads = 8;
  constexpr int kPushes = 400;
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {16, 4}, Sgd(), Constant(0))}).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPushes; ++i) {
        const uint64_t id = 1 + static_cast<uint64_t>(t) * kPushes + i;
        if (i % 2 == 0) {
          EXPECT_TRUE(Push(*store, "w", id, std::vector<float>(64, 1.0f)).ok());
        } else {
          std::vector<int64_t> ids(16);
          for (int r = 0; r < 16; ++r) ids[r] = r;
          EXPECT_TRUE(PushRows(*store, "w", id, ids, std::vector<float>(64, 1.0f)).ok());
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  const Snapshot s = PullAll(*store, "w");
  EXPECT_EQ(s.version, kThreads * kPushes);
  for (float x : s.data) ASSERT_EQ(x, -static_cast<float>(kThreads * kPushes));
}

TEST(ShardStoreTest, PullsNeverSeeAHalfAppliedUpdate) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {256, 64}, Sgd(), Constant(0))}).ok());
  std::atomic<bool> stop{false};
  std::thread pusher([&] {
    for (uint64_t id = 1; id <= 300; ++id) {
      EXPECT_TRUE(Push(*store, "w", id, std::vector<float>(256 * 64, 1.0f)).ok());
    }
    stop = true;
  });
  int snapshots = 0;
  while (!stop.load() || snapshots == 0) {
    const Snapshot s = PullAll(*store, "w");
    ++snapshots;
    ASSERT_EQ(s.data.size(), 256u * 64u);
    for (float x : s.data) ASSERT_EQ(x, -static_cast<float>(s.version));
  }
  pusher.join();
  EXPECT_GT(snapshots, 0);
}

TEST(ShardStoreTest, ConcurrentWaitersAllComplete) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {2})}).ok());
  constexpr int kWaiters = 50;
  std::atomic<int> ok{0};
  std::vector<PullResponse> responses(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    PullRequest request;
    request.set_shard("w");
    request.set_min_version(1 + i % 5);
    request.set_wait_timeout_ms(i % 2 == 0 ? 60000 : 0);
    store->Pull(request, &responses[i], [&](const absl::Status& s) {
      EXPECT_TRUE(s.ok()) << s;
      ++ok;
    });
  }
  std::thread pusher([&] {
    for (uint64_t id = 1; id <= 5; ++id) EXPECT_TRUE(Push(*store, "w", id, {1, 1}).ok());
  });
  pusher.join();
  EXPECT_EQ(ok.load(), kWaiters);
  for (int i = 0; i < kWaiters; ++i) EXPECT_EQ(responses[i].version(), 1 + i % 5);
}

TEST(ShardStoreTest, HealthAndList) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("a", {10, 2}, Adam()), Spec("b", {3})}).ok());
  HealthResponse health;
  store->Health(&health);
  EXPECT_EQ(health.status(), "SERVING");
  EXPECT_EQ(health.task_type(), "ps");
  EXPECT_EQ(health.task_index(), 2);
  EXPECT_EQ(health.num_shards(), 2);
  EXPECT_EQ(health.bytes(), 10 * 2 * 4 * 3 + 3 * 4);
  EXPECT_GE(health.uptime_ms(), 0);
  ListShardsRequest list;
  list.set_variable("a");
  ListShardsResponse listed;
  ASSERT_TRUE(store->ListShards(list, &listed).ok());
  ASSERT_EQ(listed.shards_size(), 1);
  EXPECT_EQ(listed.shards(0).spec().name(), "a");
  EXPECT_EQ(listed.shards(0).bytes(), 10 * 2 * 4 * 3);
  EXPECT_EQ(listed.shards(0).version(), 0);
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

PushRequest BatchItem(const std::string& shard, uint64_t id, int64_t begin, int64_t end) {
  PushRequest item;
  item.set_request_id(id);
  item.set_shard(shard);
  item.set_row_begin(begin);
  item.set_row_end(end);
  return item;
}

TEST(ShardStoreTest, PushBatchAppliesEachItemFromItsPartOfTheData) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("a", {3, 2}, Sgd(), Constant(0)),
                              Spec("b", {2}, Sgd(), Constant(10))})
                  .ok());
  PushBatchRequest request;
  *request.add_pushes() = BatchItem("a", 1, 0, 2);  // rows 0-1 of a
  *request.add_pushes() = BatchItem("b", 2, 0, 0);  // all of b
  *request.add_pushes() = BatchItem("a", 3, 2, 3);  // row 2 of a
  const std::vector<float> a01 = {1, 2, 3, 4}, b = {5, 6}, a2 = {7, 8};
  request.set_data(Bytes(a01) + Bytes(b) + Bytes(a2));
  for (const auto* part : {&a01, &b, &a2}) request.add_data_bytes(part->size() * 4);
  PushBatchResponse response;
  ASSERT_TRUE(store->PushBatch(request, &response).ok());
  ASSERT_EQ(response.pushes_size(), 3);
  EXPECT_TRUE(response.pushes(0).applied());
  EXPECT_EQ(response.pushes(2).version(), 2);  // a's second update
  EXPECT_EQ(PullAll(*store, "a").data, (std::vector<float>{-1, -2, -3, -4, -7, -8}));
  EXPECT_EQ(PullAll(*store, "b").data, (std::vector<float>{5, 4}));

  // A retry of the same batch is answered item by item as duplicates.
  ASSERT_TRUE(store->PushBatch(request, &response).ok());
  for (const PushResponse& r : response.pushes()) EXPECT_TRUE(r.duplicate());
  EXPECT_EQ(PullAll(*store, "b").data, (std::vector<float>{5, 4}));
}

// A batch whose bytes come in pieces cut anywhere and at any address (as in gRPC's receive
// slices) updates the shards bit for bit as the same batch in one buffer, for Adam (split
// over threads and runs) and for a SYNC step (copied into the step's accumulator).
TEST(ShardStoreTest, PushBatchFromPiecesIsBitIdenticalToOneBuffer) {
  constexpr int64_t kRows = 300000;  // larger than a parallel grain, two parameter blocks
  std::vector<float> grad(kRows + 8);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = std::sin(0.001f * static_cast<float>(i));
  auto run = [&](bool pieces, int shift) {
    auto store = NewStore();
    EXPECT_TRUE(
        Create(*store, {Spec("w", {kRows}, Adam()), SyncSpec("s", {4, 2}, 1)}).ok());
    PushBatchRequest request;
    *request.add_pushes() = BatchItem("w", 1, 0, 0);
    PushRequest sync_item = BatchItem("s", 2, 0, 0);
    sync_item.mutable_sync()->set_step(0);
    sync_item.mutable_sync()->set_replica(0);
    *request.add_pushes() = sync_item;
    request.add_data_bytes(kRows * 4);
    request.add_data_bytes(8 * 4);
    std::string storage(static_cast<size_t>(shift), 'x');
    storage += Bytes(grad);
    const absl::string_view all = absl::string_view(storage).substr(static_cast<size_t>(shift));
    PushBatchResponse response;
    for (int t = 0; t < 3; ++t) {
      request.mutable_pushes(0)->set_request_id(10 + t);
      request.mutable_pushes(1)->set_request_id(20 + t);
      request.mutable_pushes(1)->mutable_sync()->set_step(t);
      absl::Status status;
      if (pieces) {
        // Cuts inside floats, next to item boundaries, and a one-byte piece.
        const size_t cuts[] = {0, 3, 16387, 16388, kRows * 4 - 1, kRows * 4 + 5,
                               kRows * 4 + 6, all.size()};
        std::vector<absl::string_view> parts;
        for (size_t k = 0; k + 1 < std::size(cuts); ++k) {
          parts.push_back(all.substr(cuts[k], cuts[k + 1] - cuts[k]));
        }
        status = store->PushBatch(request, parts, &response);
      } else {
        request.set_data(std::string(all));
        status = store->PushBatch(request, &response);
      }
      EXPECT_TRUE(status.ok()) << status;
      EXPECT_TRUE(response.pushes(1).applied());
    }
    return std::make_pair(PullAll(*store, "w").data, PullAll(*store, "s").data);
  };
  const auto whole = run(false, 0);
  for (int shift = 0; shift < 4; ++shift) {
    const auto cut = run(true, shift);
    EXPECT_TRUE(cut.first == whole.first) << "Adam shard, shift " << shift;
    EXPECT_TRUE(cut.second == whole.second) << "SYNC shard, shift " << shift;
  }
}

TEST(ShardStoreTest, BadPushBatchesChangeNothingAndNameTheField) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("a", {2}, Sgd(), Constant(0))}).ok());
  auto make = [] {
    PushBatchRequest request;
    *request.add_pushes() = BatchItem("a", 1, 0, 0);
    request.set_data(Bytes({1, 1}));
    request.add_data_bytes(8);
    return request;
  };
  PushBatchRequest missing = make();
  missing.clear_data_bytes();
  PushBatchRequest overrun = make();
  overrun.set_data_bytes(0, 12);
  PushBatchRequest short_sum = make();
  short_sum.set_data_bytes(0, 4);
  PushBatchRequest inline_data = make();
  inline_data.mutable_pushes(0)->set_data(Bytes({1, 1}));
  const std::pair<PushBatchRequest, std::string> cases[] = {
      {missing, "data_bytes has 0 entries"},
      {overrun, "data_bytes[0] = 12 overruns"},
      {short_sum, "data_bytes sum to 4, data has 8"},
      {inline_data, "pushes[0].data must be empty"},
  };
  for (const auto& [request, expected] : cases) {
    PushBatchResponse response;
    absl::Status s = store->PushBatch(request, &response);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << expected;
    EXPECT_NE(s.message().find(expected), std::string::npos) << s;
  }
  EXPECT_EQ(PullAll(*store, "a").data, (std::vector<float>{0, 0}));
  EXPECT_EQ(PullAll(*store, "a").version, 0);
}

}  // namespace
}  // namespace shardps

// --- Recovery generations, limits, DropShards, Health.

namespace shardps {
namespace {

std::unique_ptr<ShardStore> NewStoreWith(ShardStore::Options options) {
  auto store = ShardStore::Create(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return *std::move(store);
}

absl::Status SetGeneration(ShardStore& store, int64_t generation, int64_t* after = nullptr) {
  SetGenerationRequest request;
  request.set_generation(generation);
  SetGenerationResponse response;
  absl::Status s = store.SetGeneration(request, &response);
  if (after != nullptr) *after = response.generation();
  return s;
}

TEST(ShardStoreTest, GenerationOnlyRises) {
  auto store = NewStore();
  int64_t after = -1;
  ASSERT_TRUE(SetGeneration(*store, 3, &after).ok());
  EXPECT_EQ(after, 3);
  ASSERT_TRUE(SetGeneration(*store, 2, &after).ok());
  EXPECT_EQ(after, 3);
  EXPECT_EQ(SetGeneration(*store, -1).code(), absl::StatusCode::kInvalidArgument);
  HealthResponse health;
  store->Health(&health);
  EXPECT_EQ(health.generation(), 3);
}

TEST(ShardStoreTest, UpdatesFromAStaleGenerationAreRefusedAndChangeNothing) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("w", {2, 2}, Adam()), SyncSpec("s", {2}, 1, Sgd())}).ok());
  ASSERT_TRUE(SetGeneration(*store, 5).ok());
  const Snapshot before = PullAll(*store, "w");
  const Snapshot s_before = PullAll(*store, "s");

  uint64_t id = 100;
  auto push = [&](int64_t generation) {
    PushRequest r;
    r.set_request_id(++id);
    r.set_shard("w");
    r.set_data(Bytes({1, 1, 1, 1}));
    r.set_generation(generation);
    PushResponse resp;
    return store->Push(r, &resp);
  };
  auto push_rows = [&](int64_t generation) {
    PushRowsRequest r;
    r.set_request_id(++id);
    r.set_shard("w");
    r.add_ids(1);
    r.set_data(Bytes({1, 1}));
    r.set_generation(generation);
    PushRowsResponse resp;
    return store->PushRows(r, &resp);
  };
  auto assign = [&](int64_t generation) {
    AssignRequest r;
    r.set_request_id(++id);
    r.set_shard("w");
    r.set_data(Bytes({7, 7, 7, 7}));
    r.set_generation(generation);
    AssignResponse resp;
    return store->Assign(r, &resp);
  };
  auto sync_push = [&](int64_t generation) {
    PushRequest r;
    r.set_request_id(++id);
    r.set_shard("s");
    r.set_data(Bytes({1, 1}));
    r.set_generation(generation);
    PushResponse resp;
    return store->Push(r, &resp);
  };
  auto batch = [&](int64_t generation) {
    PushBatchRequest r;
    PushRequest* item = r.add_pushes();
    item->set_request_id(++id);
    item->set_shard("w");
    item->set_generation(generation);
    r.add_data_bytes(16);
    r.set_data(Bytes({1, 1, 1, 1}));
    PushBatchResponse resp;
    return store->PushBatch(r, &resp);
  };
  const std::vector<std::pair<std::string, std::function<absl::Status(int64_t)>>> updates = {
      {"push", push}, {"push rows", push_rows}, {"assign", assign},
      {"sync push", sync_push}, {"push batch", batch}};
  for (const auto& [label, run] : updates) {
    const absl::Status stale = run(4);
    EXPECT_EQ(stale.code(), absl::StatusCode::kAborted) << label << ": " << stale;
    const auto detail = GetDetail(stale);
    ASSERT_TRUE(detail.has_value()) << label;
    EXPECT_EQ(detail->kind(), ErrorDetail::STALE_GENERATION) << label;
    EXPECT_EQ(detail->generation(), 5) << label;
    EXPECT_EQ(detail->ps_task(), 2) << label;
    EXPECT_TRUE(absl::StrContains(stale.message(), "generation 4")) << stale;
    const absl::Status ahead = run(6);
    EXPECT_EQ(ahead.code(), absl::StatusCode::kFailedPrecondition) << label << ": " << ahead;
  }
  EXPECT_EQ(Bytes(PullAll(*store, "w").data), Bytes(before.data));
  EXPECT_EQ(PullAll(*store, "w").version, before.version);
  EXPECT_EQ(Bytes(PullAll(*store, "s").data), Bytes(s_before.data));
  // The current generation and 0 (unfenced) are applied.
  EXPECT_TRUE(push(5).ok());
  EXPECT_TRUE(push(0).ok());
  EXPECT_TRUE(sync_push(5).ok());
  EXPECT_EQ(PullAll(*store, "w").version, 2);
  EXPECT_EQ(PullAll(*store, "s").version, 1);
}

TEST(ShardStoreTest, APushForAnAppliedSyncStepIsADuplicateWhateverItsRequestId) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {SyncSpec("s", {2}, 1, Sgd())}).ok());
  ASSERT_TRUE(Push(*store, "s", 1, {1, 1}, 0, 0, nullptr, 0, 0).ok());
  const Snapshot applied = PullAll(*store, "s");
  ASSERT_EQ(applied.version, 1);
  // A re-run of step 0 under another request id (its rows routed otherwise after a bucket
  // move, say): every replica's part of step 0 is in it already.
  PushResponse again;
  ASSERT_TRUE(Push(*store, "s", 2, {5, 5}, 0, 0, &again, 0, 0).ok());
  EXPECT_TRUE(again.duplicate());
  EXPECT_FALSE(again.applied());
  EXPECT_EQ(again.version(), 1);
  EXPECT_EQ(Bytes(PullAll(*store, "s").data), Bytes(applied.data));
  EXPECT_EQ(PullAll(*store, "s").version, 1);
  // A missing shard stays NOT_FOUND with no detail (the client adds its own).
  const absl::Status missing = Push(*store, "nope", 3, {1});
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(DetailKind(missing), ErrorDetail::UNSPECIFIED);
}

TEST(ShardStoreTest, CreateShardsPastTheMemoryBudgetFailsBeforeAllocating) {
  ShardStore::Options options;
  options.task_index = 1;
  options.memory_budget_bytes = 4000;
  options.snapshot_reserve = 0.5;  // 2000 bytes for parameters and slots
  auto store = NewStoreWith(options);
  // Adam: 3 floats per element. 100 elements: 1200 bytes.
  ASSERT_TRUE(Create(*store, {Spec("a", {100}, Adam())}).ok());
  ShardSpec b = Spec("b/part_0", {100}, Adam());
  b.set_variable("b");
  const absl::Status s = Create(*store, {Spec("c", {10}, Sgd()), b});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  for (const char* needle : {"variable 'b'", "'b/part_0'", "1200 bytes", "760 bytes available"}) {
    EXPECT_TRUE(absl::StrContains(s.message(), needle)) << needle << " not in " << s;
  }
  const auto detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::LIMIT);
  EXPECT_EQ(detail->limit(), "--memory_budget_bytes");
  // Nothing was created, "c" included, and nothing stays reserved.
  ListShardsResponse listed;
  ASSERT_TRUE(store->ListShards({}, &listed).ok());
  EXPECT_EQ(listed.shards_size(), 1);
  HealthResponse health;
  store->Health(&health);
  EXPECT_EQ(health.memory_budget_bytes(), 4000);
  EXPECT_EQ(health.memory_available_bytes(), 800);
  EXPECT_EQ(health.bytes(), 1200);
  // What fits still fits; dropping "a" makes room for "b".
  ASSERT_TRUE(Create(*store, {Spec("c", {10}, Sgd())}).ok());
  DropShardsRequest drop;
  drop.add_variables("a");
  DropShardsResponse dropped;
  ASSERT_TRUE(store->DropShards(drop, &dropped).ok());
  EXPECT_EQ(dropped.dropped(), 1);
  EXPECT_TRUE(Create(*store, {b}).ok());
  store->Health(&health);
  EXPECT_EQ(health.memory_available_bytes(), 2000 - 40 - 1200);
}

TEST(ShardStoreTest, BadOptionsAreRefused) {
  ShardStore::Options bad_reserve;
  bad_reserve.snapshot_reserve = 1.0;
  EXPECT_EQ(ShardStore::Create(bad_reserve).status().code(), absl::StatusCode::kInvalidArgument);
  ShardStore::Options bad_budget;
  bad_budget.memory_budget_bytes = -1;
  EXPECT_EQ(ShardStore::Create(bad_budget).status().code(), absl::StatusCode::kInvalidArgument);
  ShardStore::Options bad_reply;
  bad_reply.max_reply_bytes = -1;
  EXPECT_EQ(ShardStore::Create(bad_reply).status().code(), absl::StatusCode::kInvalidArgument);
}

void ExpectReplyLimit(const absl::Status& s, const std::string& bytes) {
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), bytes)) << bytes << " not in " << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "--max_reply_bytes=1048576")) << s;
  const auto detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::LIMIT);
  EXPECT_EQ(detail->limit(), "--max_reply_bytes");
}

TEST(ShardStoreTest, PullsPastTheReplyBoundFailAtOnce) {
  ShardStore::Options options;
  options.max_reply_bytes = 1 << 20;
  auto store = NewStoreWith(options);
  // 1 MiB rows (262144 floats), 3 of them.
  ASSERT_TRUE(Create(*store, {Spec("e", {3, 262144}, Sgd(), Constant(0))}).ok());
  // 40,000 ids of 1 MiB rows ask for a ~40 GiB reply: refused before anything is allocated
  // (the ps must not abort on std::bad_alloc).
  PullRowsRequest rows;
  rows.set_shard("e");
  for (int i = 0; i < 40000; ++i) rows.add_ids(i % 3);
  PullRowsResponse rows_response;
  absl::Status status = absl::UnknownError("not called");
  store->PullRows(rows, &rows_response, [&](const absl::Status& s) { status = s; });
  ExpectReplyLimit(status, "41943040000 bytes");
  EXPECT_TRUE(rows_response.data().empty());

  // One row fits; two do not.
  PullRequest pull;
  pull.set_shard("e");
  pull.set_row_begin(0);
  pull.set_row_end(1);
  PullResponse response;
  EXPECT_TRUE(PullNow(*store, pull, &response).ok());
  pull.set_row_end(2);
  ExpectReplyLimit(PullNow(*store, pull, &response), "2097152 bytes");

  // A batch is bounded as a whole.
  PullBatchRequest batch;
  for (int i = 0; i < 2; ++i) {
    PullRequest* item = batch.add_pulls();
    item->set_shard("e");
    item->set_row_begin(i);
    item->set_row_end(i + 1);
  }
  std::vector<PullResponse> responses;
  std::vector<ShardStore::PulledBytes> pulled;
  status = absl::UnknownError("not called");
  store->PullBatch(batch, &responses, &pulled, [&](const absl::Status& s) { status = s; });
  ExpectReplyLimit(status, "2097152 bytes");
  EXPECT_TRUE(pulled.empty());

  // So is a batch of row pulls: two items of one row each, refused before either is read.
  PullRowsBatchRequest row_batch;
  for (int i = 0; i < 2; ++i) {
    PullRowsRequest* item = row_batch.add_pulls();
    item->set_shard("e");
    item->add_ids(i);
  }
  PullRowsResponse row_responses[2];
  PullRowsResponse* row_items[] = {&row_responses[0], &row_responses[1]};
  status = absl::UnknownError("not called");
  store->PullRowsBatch(row_batch, row_items, [&](const absl::Status& s) { status = s; });
  ExpectReplyLimit(status, "2097152 bytes");
  EXPECT_TRUE(row_responses[0].data().empty());
  EXPECT_TRUE(row_responses[1].data().empty());
}

// A batch of row pulls reads each item as PullRows would; a batch of row pushes applies its
// items in order up to the first failure, and a retry applies each once.
TEST(ShardStoreTest, RowBatchesActAsTheirItems) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("a", {5, 2}, Sgd(), Constant(1)),
                              Spec("b", {4, 3}, Sgd(), Constant(2))})
                  .ok());
  PushRowsBatchRequest push;
  PushRowsRequest* item = push.add_pushes();
  item->set_request_id(11);
  item->set_shard("a");
  item->add_ids(3);
  item->add_ids(3);  // summed
  const std::vector<float> ga = {1, 2, 3, 4};
  item->set_data(ga.data(), ga.size() * 4);
  item = push.add_pushes();
  item->set_request_id(12);
  item->set_shard("b");
  item->add_ids(9);  // outside b's 4 rows
  const std::vector<float> gb = {10, 20, 30};
  item->set_data(gb.data(), gb.size() * 4);
  PushRowsBatchResponse pushed;
  absl::Status failed = store->PushRowsBatch(push, &pushed);
  EXPECT_EQ(failed.code(), absl::StatusCode::kInvalidArgument) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), "'b'")) << failed;
  push.mutable_pushes(1)->set_ids(0, 1);
  ASSERT_TRUE(store->PushRowsBatch(push, &pushed).ok());
  ASSERT_EQ(pushed.pushes_size(), 2);
  EXPECT_TRUE(pushed.pushes(0).duplicate());
  EXPECT_TRUE(pushed.pushes(1).applied());

  PullRowsBatchRequest pull;
  PullRowsRequest* p = pull.add_pulls();
  p->set_shard("a");
  p->add_ids(3);
  p->add_ids(0);
  pull.add_pulls()->set_shard("b");
  pull.mutable_pulls(1)->add_ids(1);
  PullRowsResponse responses[2];
  PullRowsResponse* items[] = {&responses[0], &responses[1]};
  absl::Status status = absl::UnknownError("not called");
  store->PullRowsBatch(pull, items, [&](const absl::Status& s) { status = s; });
  ASSERT_TRUE(status.ok()) << status;
  // SGD at lr 1 (Sgd()): a's row 3 moved once by the summed gradient {4, 6}.
  EXPECT_EQ(responses[0].data(), Bytes({1 - 4.0f, 1 - 6.0f, 1, 1}));
  EXPECT_EQ(responses[1].data(), Bytes({2 - 10.0f, 2 - 20.0f, 2 - 30.0f}));
  EXPECT_EQ(responses[0].version(), 1);
  EXPECT_EQ(responses[1].version(), 1);
  // One response per item, or INVALID_ARGUMENT.
  status = absl::UnknownError("not called");
  store->PullRowsBatch(pull, absl::MakeSpan(items, 1), [&](const absl::Status& s) { status = s; });
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
}

TEST(ShardStoreTest, PullBatchPullsEveryItemInPlace) {
  auto store = NewStore();
  ASSERT_TRUE(Create(*store, {Spec("a", {3, 2}, Sgd(), Constant(1)),
                              Spec("b", {2}, Sgd(), Constant(2))})
                  .ok());
  PullBatchRequest batch;
  PullRequest* a = batch.add_pulls();
  a->set_shard("a");
  a->set_row_begin(1);
  batch.add_pulls()->set_shard("b");
  std::vector<PullResponse> responses;
  std::vector<ShardStore::PulledBytes> pulled;
  absl::Status status = absl::UnknownError("not called");
  store->PullBatch(batch, &responses, &pulled, [&](const absl::Status& s) { status = s; });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(responses.size(), 2u);
  ASSERT_EQ(pulled.size(), 2u);
  std::string a_bytes, b_bytes;
  for (absl::string_view p : pulled[0].pieces) a_bytes.append(p.data(), p.size());
  for (absl::string_view p : pulled[1].pieces) b_bytes.append(p.data(), p.size());
  EXPECT_EQ(a_bytes, Bytes({1, 1, 1, 1}));
  EXPECT_EQ(b_bytes, Bytes({2, 2}));
  EXPECT_EQ(responses[0].shape().dim(0), 2);
  // An unknown shard fails the batch, naming it.
  batch.add_pulls()->set_shard("nope");
  store->PullBatch(batch, &responses, &pulled, [&](const absl::Status& s) { status = s; });
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(status.message(), "'nope'"));
}

TEST(ShardStoreTest, DropShardsRemovesVariablesAndCancelsTheirWaiters) {
  auto store = NewStore();
  ShardSpec a0 = Spec("a/part_0", {2});
  a0.set_variable("a");
  ShardSpec a1 = Spec("a/part_1", {2});
  a1.set_variable("a");
  ASSERT_TRUE(Create(*store, {a0, a1, Spec("b", {2})}).ok());
  PullRequest wait;
  wait.set_shard("a/part_1");
  wait.set_min_version(1);
  PullResponse waited;
  absl::Status waited_status = absl::UnknownError("still waiting");
  store->Pull(wait, &waited, [&](const absl::Status& s) { waited_status = s; });
  EXPECT_EQ(waited_status.code(), absl::StatusCode::kUnknown);

  DropShardsRequest drop;
  drop.add_variables("a");
  drop.add_variables("not-there");
  DropShardsResponse response;
  ASSERT_TRUE(store->DropShards(drop, &response).ok());
  EXPECT_EQ(response.dropped(), 2);
  EXPECT_EQ(waited_status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(absl::StrContains(waited_status.message(), "dropped")) << waited_status;
  EXPECT_EQ(Push(*store, "a/part_0", 1, {1, 1}).code(), absl::StatusCode::kNotFound);
  HealthResponse health;
  store->Health(&health);
  EXPECT_EQ(health.num_shards(), 1);
  EXPECT_EQ(health.bytes(), 2 * 4);
  // Dropped shards can be created again, with another spec.
  EXPECT_TRUE(Create(*store, {Spec("a/part_0", {5})}).ok());

  EXPECT_EQ(store->DropShards(DropShardsRequest(), &response).code(),
            absl::StatusCode::kInvalidArgument);
  DropShardsRequest all;
  all.set_all(true);
  ASSERT_TRUE(store->DropShards(all, &response).ok());
  EXPECT_EQ(response.dropped(), 2);
  store->Health(&health);
  EXPECT_EQ(health.num_shards(), 0);
  EXPECT_EQ(health.bytes(), 0);
}

TEST(ShardStoreTest, HealthReportsIncarnationAndMemory) {
  ShardStore::Options options;
  options.incarnation = 77;
  options.memory_budget_bytes = 1000;
  options.snapshot_reserve = 0.2;
  auto store = NewStoreWith(options);
  HealthResponse health;
  store->Health(&health);
  EXPECT_EQ(health.incarnation(), 77u);
  EXPECT_EQ(health.generation(), 0);
  EXPECT_EQ(health.memory_budget_bytes(), 1000);
  EXPECT_EQ(health.memory_available_bytes(), 800);
  EXPECT_EQ(health.snapshot_copy_bytes(), 0);
  // Drawn at random (non-zero) when not given, and different per store.
  HealthResponse h1, h2;
  NewStore()->Health(&h1);
  NewStore()->Health(&h2);
  EXPECT_NE(h1.incarnation(), 0u);
  EXPECT_NE(h1.incarnation(), h2.incarnation());
}

}  // namespace
}  // namespace shardps
