// Staleness-aware ASYNC updates through the store's public API: a push's base_version, the
// staleness-scaled learning rate and delay compensation (ps_server/staleness.h), each
// checked against a reference the test computes from the parameters it pulled.
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "ps_server/shard_store.h"

namespace shardps {
namespace {

using Floats = std::vector<float>;

std::string Bytes(const Floats& v) {
  std::string s(v.size() * sizeof(float), '\0');
  if (!v.empty()) std::memcpy(&s[0], v.data(), s.size());
  return s;
}

Floats ToFloats(const std::string& s) {
  Floats v(s.size() / sizeof(float));
  if (!v.empty()) std::memcpy(v.data(), s.data(), s.size());
  return v;
}

OptimizerSpec Optimizer(OptimizerSpec::Type type, double lr) {
  OptimizerSpec o;
  o.set_type(type);
  o.set_learning_rate(lr);
  return o;
}

// An unsplit variable of `rows` x `width` starting at 0.5 + 0.1 * element.
ShardSpec Spec(const std::string& name, int64_t rows, int64_t width, OptimizerSpec optimizer,
               UpdateSpec update) {
  ShardSpec s;
  s.set_name(name);
  s.set_variable(name);
  s.set_num_parts(1);
  for (int64_t d : {rows, width}) {
    s.mutable_shape()->add_dim(d);
    s.mutable_full_shape()->add_dim(d);
  }
  *s.mutable_optimizer() = optimizer;
  s.mutable_initializer()->set_type(InitializerSpec::CONSTANT);
  s.mutable_initializer()->set_value(0.5);
  *s.mutable_update() = update;
  return s;
}

UpdateSpec Inverse() {
  UpdateSpec u;
  u.set_staleness_lr(UpdateSpec::INVERSE);
  return u;
}

UpdateSpec Compensated(double lambda, int retained = 0, bool adaptive = false) {
  UpdateSpec u;
  u.set_delay_compensation(lambda);
  u.set_retained_versions(retained);
  u.set_delay_compensation_adaptive(adaptive);
  return u;
}

// A deterministic gradient of n floats for push k, of mixed signs and magnitudes.
Floats Grad(size_t n, int k) {
  Floats g(n);
  for (size_t i = 0; i < n; ++i) g[i] = std::sin(0.7f * i + 1.3f * k) * (1.0f + 0.2f * i);
  return g;
}

class StalenessStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ShardStore::Create({});
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
  }

  absl::Status Create(const ShardSpec& spec) {
    CreateShardsRequest request;
    *request.add_shards() = spec;
    CreateShardsResponse response;
    return store_->CreateShards(request, &response);
  }

  // The shard's parameters and version.
  std::pair<Floats, int64_t> Pull(const std::string& shard) {
    PullRequest request;
    request.set_shard(shard);
    PullResponse response;
    absl::Status status = absl::InternalError("not done");
    store_->Pull(request, &response, [&](const absl::Status& s) { status = s; });
    EXPECT_TRUE(status.ok()) << status;
    return {ToFloats(response.data()), response.version()};
  }

  // Pushes `grad` to rows [begin, end) (end 0: all) computed at `base`, and remembers the
  // parameters of every version it sees in params_at_.
  absl::Status Push(const std::string& shard, const Floats& grad, int64_t base,
                    int64_t begin = 0, int64_t end = 0) {
    Remember(shard);
    PushRequest request;
    request.set_request_id(++request_id_);
    request.set_shard(shard);
    request.set_row_begin(begin);
    request.set_row_end(end);
    request.set_data(Bytes(grad));
    request.set_base_version(base);
    PushResponse response;
    absl::Status status = store_->Push(request, &response);
    Remember(shard);
    return status;
  }

  absl::Status PushRows(const std::string& shard, const std::vector<int64_t>& ids,
                        const Floats& grad, int64_t base) {
    Remember(shard);
    PushRowsRequest request;
    request.set_request_id(++request_id_);
    request.set_shard(shard);
    for (int64_t id : ids) request.add_ids(id);
    request.set_data(Bytes(grad));
    request.set_base_version(base);
    PushRowsResponse response;
    absl::Status status = store_->PushRows(request, &response);
    Remember(shard);
    return status;
  }

  void Remember(const std::string& shard) {
    auto [params, version] = Pull(shard);
    params_at_[version] = params;
  }

  std::unique_ptr<ShardStore> store_;
  uint64_t request_id_ = 0;
  std::map<int64_t, Floats> params_at_;
};

void ExpectNear(const Floats& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

// SGD with staleness_lr INVERSE: lr / max(1, staleness), staleness counted in updates.
TEST_F(StalenessStoreTest, InverseDividesSgdLearningRateByStaleness) {
  const double lr = 0.1;
  ASSERT_TRUE(Create(Spec("w", 2, 3, Optimizer(OptimizerSpec::SGD, lr), Inverse())).ok());
  std::vector<double> want(6, 0.5);
  auto apply = [&](const Floats& g, double scale) {
    const float lr_t = static_cast<float>(static_cast<double>(static_cast<float>(lr)) * scale);
    for (size_t i = 0; i < want.size(); ++i) want[i] -= lr_t * g[i];
  };
  // (base, expected staleness): base 0 is unknown (plain); base == version is fresh.
  const std::vector<std::pair<int64_t, int64_t>> pushes = {{0, 0}, {1, 0}, {1, 1}, {1, 2},
                                                           {2, 2}, {1, 4}, {0, 0}};
  for (size_t k = 0; k < pushes.size(); ++k) {
    const Floats g = Grad(6, static_cast<int>(k));
    ASSERT_TRUE(Push("w", g, pushes[k].first).ok()) << k;
    apply(g, 1.0 / std::max<int64_t>(1, pushes[k].second));
    ExpectNear(Pull("w").first, want, "after push");
  }
  EXPECT_EQ(Pull("w").second, static_cast<int64_t>(pushes.size()));
}

// A push in row chunks (each chunk an update of its own) is not stale by its own chunks:
// only updates that touched a chunk's rows count.
TEST_F(StalenessStoreTest, InverseCountsOnlyUpdatesOfThePushsRows) {
  ASSERT_TRUE(Create(Spec("w", 2, 2, Optimizer(OptimizerSpec::SGD, 1.0), Inverse())).ok());
  const Floats g = {1.0f, 1.0f};
  ASSERT_TRUE(Push("w", Floats(4, 0.0f), 0).ok());  // version 1
  // A step computed at version 1, in two chunks: rows [0, 1) then [1, 2).
  ASSERT_TRUE(Push("w", g, 1, 0, 1).ok());  // staleness 0
  ASSERT_TRUE(Push("w", g, 1, 1, 2).ok());  // version 2 touched row 0 only: staleness 0
  // Another step computed at version 1: both of its chunks are behind by one update.
  ASSERT_TRUE(Push("w", g, 1, 0, 1).ok());  // staleness 1 (version 2): lr / 1
  ASSERT_TRUE(Push("w", Floats(4, 0.0f), 4).ok());  // version 5 touches both rows
  ASSERT_TRUE(Push("w", g, 1, 1, 2).ok());  // versions 3 and 5 touched row 1: lr / 2
  ExpectNear(Pull("w").first, {0.5 - 2, 0.5 - 2, 0.5 - 1.5, 0.5 - 1.5}, "chunks");
}

// Adam with INVERSE: Adam's lr_t is scaled; the moments take the gradient as it is.
TEST_F(StalenessStoreTest, InverseScalesAdamStepSize) {
  const double lr = 0.01;
  ASSERT_TRUE(Create(Spec("w", 1, 4, Optimizer(OptimizerSpec::ADAM, lr), Inverse())).ok());
  std::vector<double> p(4, 0.5), m(4, 0.0), v(4, 0.0);
  const std::vector<std::pair<int64_t, int64_t>> pushes = {{0, 0}, {1, 0}, {1, 1}, {1, 2},
                                                           {1, 3}};
  for (size_t k = 0; k < pushes.size(); ++k) {
    const Floats g = Grad(4, static_cast<int>(k));
    ASSERT_TRUE(Push("w", g, pushes[k].first).ok());
    const double t = static_cast<double>(k + 1);
    const double lr_t = lr / std::max<int64_t>(1, pushes[k].second) *
                        std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    for (int i = 0; i < 4; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * double(g[i]) * g[i];
      p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-7);
    }
  }
  const Floats got = Pull("w").first;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got[i], p[i], 1e-5 * (1 + std::abs(p[i]))) << i;
}

// g + lambda * g * g * (w_now - w_bak), then the optimizer; `bak` the pulled parameters
// at the push's base version, `now` those when it is applied.
Floats Compensate(const Floats& g, const Floats& now, const Floats& bak, float lambda) {
  Floats out(g.size());
  for (size_t i = 0; i < g.size(); ++i) out[i] = g[i] + lambda * g[i] * g[i] * (now[i] - bak[i]);
  return out;
}

TEST_F(StalenessStoreTest, DelayCompensationForSgdDenseAndRows) {
  const float lambda = 2.0f;
  const float lr = 0.25f;
  ASSERT_TRUE(
      Create(Spec("w", 3, 2, Optimizer(OptimizerSpec::SGD, lr), Compensated(lambda, 2))).ok());
  auto sgd = [&](Floats p, const Floats& g) {
    for (size_t i = 0; i < p.size(); ++i) p[i] -= lr * g[i];
    return p;
  };
  auto check = [&](const Floats& want, const char* what) {
    ExpectNear(Pull("w").first, std::vector<double>(want.begin(), want.end()), what);
  };
  ASSERT_TRUE(Push("w", Grad(6, 0), 0).ok());  // version 1, plain
  ASSERT_TRUE(Push("w", Grad(6, 1), 1).ok());  // fresh: nothing to compensate
  check(sgd(params_at_[1], Grad(6, 1)), "fresh");
  // Computed at version 1, applied at version 2.
  Floats g = Compensate(Grad(6, 2), params_at_[2], params_at_[1], lambda);
  ASSERT_TRUE(Push("w", Grad(6, 2), 1).ok());
  check(sgd(params_at_[2], g), "stale by one");
  // Two versions are kept: after a fresh push at version 3, versions 2 and 3. A push based
  // on version 1 is then compensated against the oldest kept, version 2.
  ASSERT_TRUE(Push("w", Grad(6, 3), 3).ok());  // version 4
  g = Compensate(Grad(6, 4), params_at_[4], params_at_[2], lambda);
  ASSERT_TRUE(Push("w", Grad(6, 4), 1).ok());  // version 5
  check(sgd(params_at_[4], g), "older than the versions kept");
  // Base version 0: no policy, even when stale.
  ASSERT_TRUE(Push("w", Grad(6, 5), 0).ok());
  check(sgd(params_at_[5], Grad(6, 5)), "no base version");

  // Row pushes, row by row: rows 2 and 0, computed at version 5, applied at version 6.
  const std::vector<int64_t> ids = {2, 0};
  const Floats rows = Grad(4, 6);
  ASSERT_TRUE(PushRows("w", ids, rows, 5).ok());
  Floats want = params_at_[6];
  for (size_t k = 0; k < ids.size(); ++k) {
    const size_t r = static_cast<size_t>(ids[k]);
    for (size_t c = 0; c < 2; ++c) {
      const float gi = rows[k * 2 + c];
      const float now = params_at_[6][r * 2 + c];
      const float bak = params_at_[5][r * 2 + c];
      want[r * 2 + c] = now - lr * (gi + lambda * gi * gi * (now - bak));
    }
  }
  check(want, "row push");
}

TEST_F(StalenessStoreTest, DelayCompensationForAdam) {
  const float lambda = 0.5f;
  const double lr = 0.01;
  ASSERT_TRUE(
      Create(Spec("w", 1, 5, Optimizer(OptimizerSpec::ADAM, lr), Compensated(lambda))).ok());
  std::vector<double> m(5, 0.0), v(5, 0.0);
  // (base) of each push; versions advance by one per push.
  const std::vector<int64_t> bases = {0, 1, 1, 2, 1, 5};
  for (size_t k = 0; k < bases.size(); ++k) {
    Remember("w");
    const int64_t now_version = static_cast<int64_t>(k);
    const Floats raw = Grad(5, static_cast<int>(k));
    const Floats g = bases[k] == 0 ? raw
                                   : Compensate(raw, params_at_[now_version],
                                                params_at_[bases[k]], lambda);
    ASSERT_TRUE(Push("w", raw, bases[k]).ok());
    const double t = static_cast<double>(k + 1);
    const double lr_t = lr * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
    std::vector<double> want(5);
    for (int i = 0; i < 5; ++i) {
      m[i] = 0.9 * m[i] + 0.1 * g[i];
      v[i] = 0.999 * v[i] + 0.001 * double(g[i]) * g[i];
      want[i] = params_at_[now_version][i] - lr_t * m[i] / (std::sqrt(v[i]) + 1e-7);
    }
    const Floats got = Pull("w").first;
    for (int i = 0; i < 5; ++i) {
      EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << "push " << k << " " << i;
    }
  }
}

// DC-ASGD-a: every push moves the mean square; lambda / (sqrt(mean square) + 1e-7).
TEST_F(StalenessStoreTest, AdaptiveDelayCompensation) {
  const float lambda = 0.2f;
  const float lr = 0.5f;
  ASSERT_TRUE(Create(Spec("w", 2, 2, Optimizer(OptimizerSpec::SGD, lr),
                          Compensated(lambda, 0, /*adaptive=*/true)))
                  .ok());
  Floats ms(4, 0.0f);
  const std::vector<int64_t> bases = {0, 1, 1, 1};
  for (size_t k = 0; k < bases.size(); ++k) {
    Remember("w");
    const int64_t now_version = static_cast<int64_t>(k);
    const Floats g = Grad(4, static_cast<int>(k));
    Floats want = params_at_[now_version];
    for (int i = 0; i < 4; ++i) {
      ms[i] = 0.95f * ms[i] + 0.05f * g[i] * g[i];
      float gi = g[i];
      if (bases[k] > 0) {
        const float l = lambda / (std::sqrt(ms[i]) + 1e-7f);
        gi = g[i] + l * g[i] * g[i] * (params_at_[now_version][i] - params_at_[bases[k]][i]);
      }
      want[i] -= lr * gi;
    }
    ASSERT_TRUE(Push("w", g, bases[k]).ok());
    ExpectNear(Pull("w").first, std::vector<double>(want.begin(), want.end()), "adaptive");
  }
}

TEST_F(StalenessStoreTest, ABaseVersionAheadOfTheShardIsRefusedAndChangesNothing) {
  UpdateSpec both = Compensated(1.0);
  both.set_staleness_lr(UpdateSpec::INVERSE);
  ASSERT_TRUE(Create(Spec("w", 2, 2, Optimizer(OptimizerSpec::SGD, 1.0), both)).ok());
  ASSERT_TRUE(Create(Spec("plain", 2, 2, Optimizer(OptimizerSpec::SGD, 1.0), UpdateSpec())).ok());
  for (const std::string shard : {"w", "plain"}) {
    ASSERT_TRUE(Push(shard, Grad(4, 0), 0).ok());  // version 1
    const auto before = Pull(shard);
    for (int64_t base : {int64_t{2}, int64_t{-1}}) {
      absl::Status s = Push(shard, Grad(4, 1), base);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "shard '" + shard + "'")) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "base_version")) << s;
      s = PushRows(shard, {1}, Grad(2, 1), base);
      EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
      EXPECT_TRUE(absl::StrContains(s.message(), "shard '" + shard + "'")) << s;
      const auto after = Pull(shard);
      EXPECT_EQ(after.first, before.first);
      EXPECT_EQ(after.second, before.second);
    }
    // The refused request ids were not remembered: the same id with a good base applies.
    PushRequest request;
    request.set_request_id(request_id_);
    request.set_shard(shard);
    request.set_data(Bytes(Grad(4, 1)));
    request.set_base_version(1);
    PushResponse response;
    ASSERT_TRUE(store_->Push(request, &response).ok());
    EXPECT_FALSE(response.duplicate());
    EXPECT_EQ(response.version(), 2);
  }
}

TEST_F(StalenessStoreTest, APlainShardIgnoresTheBaseVersion) {
  ASSERT_TRUE(Create(Spec("w", 1, 3, Optimizer(OptimizerSpec::SGD, 1.0), UpdateSpec())).ok());
  ASSERT_TRUE(Push("w", Grad(3, 0), 0).ok());
  ASSERT_TRUE(Push("w", Grad(3, 1), 0).ok());
  ASSERT_TRUE(Push("w", Grad(3, 2), 1).ok());  // stale by one, applied as is
  std::vector<double> want(3, 0.5);
  for (int k = 0; k < 3; ++k) {
    for (int i = 0; i < 3; ++i) want[i] -= Grad(3, k)[i];
  }
  ExpectNear(Pull("w").first, want, "plain");
}

TEST_F(StalenessStoreTest, CreateRefusesABadPolicyNamingShardAndField) {
  UpdateSpec sync = Inverse();
  sync.set_mode(UpdateSpec::SYNC);
  sync.set_num_replicas(2);
  absl::Status s = Create(Spec("s", 2, 2, Optimizer(OptimizerSpec::SGD, 1.0), sync));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "shard 's'")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "update.staleness_lr")) << s;
  s = Create(Spec("d", 2, 2, Optimizer(OptimizerSpec::SGD, 1.0), Compensated(-1)));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "update.delay_compensation")) << s;
  ListShardsResponse list;
  ASSERT_TRUE(store_->ListShards({}, &list).ok());
  EXPECT_EQ(list.shards_size(), 0);
}

}  // namespace
}  // namespace shardps
