#include "ps_server/staleness.h"

#include <cmath>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

UpdateSpec Async() {
  UpdateSpec spec;
  spec.set_mode(UpdateSpec::ASYNC);
  return spec;
}

TEST(StalenessPolicyTest, DefaultsAndLrScale) {
  StalenessPolicy none = StalenessPolicy::FromSpec(Async());
  EXPECT_FALSE(none.enabled());
  EXPECT_EQ(none.retained_versions, 0);
  EXPECT_EQ(none.LrScale(5), 1.0);

  UpdateSpec spec = Async();
  spec.set_staleness_lr(UpdateSpec::INVERSE);
  StalenessPolicy inverse = StalenessPolicy::FromSpec(spec);
  EXPECT_TRUE(inverse.enabled());
  EXPECT_FALSE(inverse.compensates());
  EXPECT_EQ(inverse.LrScale(0), 1.0);
  EXPECT_EQ(inverse.LrScale(1), 1.0);
  EXPECT_EQ(inverse.LrScale(4), 0.25);

  spec = Async();
  spec.set_delay_compensation(0.5);
  StalenessPolicy dc = StalenessPolicy::FromSpec(spec);
  EXPECT_TRUE(dc.compensates());
  EXPECT_EQ(dc.retained_versions, StalenessPolicy::kDefaultRetainedVersions);
  EXPECT_EQ(dc.LrScale(4), 1.0);
  spec.set_retained_versions(3);
  EXPECT_EQ(StalenessPolicy::FromSpec(spec).retained_versions, 3);
}

TEST(StalenessPolicyTest, ValidationNamesTheField) {
  struct Case {
    UpdateSpec spec;
    const char* field;
  };
  std::vector<Case> cases;
  UpdateSpec s = Async();
  s.set_staleness_lr(static_cast<UpdateSpec::StalenessLr>(7));
  cases.push_back({s, "update.staleness_lr"});
  for (double bad : {-0.1, std::nan(""), 1e300}) {
    s = Async();
    s.set_delay_compensation(bad);
    cases.push_back({s, "update.delay_compensation"});
  }
  s = Async();
  s.set_delay_compensation_adaptive(true);
  cases.push_back({s, "update.delay_compensation_adaptive"});
  s = Async();
  s.set_retained_versions(4);
  cases.push_back({s, "update.retained_versions"});
  s = Async();
  s.set_delay_compensation(1);
  s.set_retained_versions(StalenessPolicy::kMaxRetainedVersions + 1);
  cases.push_back({s, "update.retained_versions"});
  s.set_retained_versions(-1);
  cases.push_back({s, "update.retained_versions"});
  s = Async();
  s.set_mode(UpdateSpec::SYNC);
  s.set_staleness_lr(UpdateSpec::INVERSE);
  cases.push_back({s, "update.staleness_lr applies to ASYNC shards only"});
  s = Async();
  s.set_mode(UpdateSpec::SYNC);
  s.set_delay_compensation(0.1);
  cases.push_back({s, "update.delay_compensation applies to ASYNC shards only"});
  for (const Case& c : cases) {
    absl::Status status = ValidateStalenessSpec(c.spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.spec.ShortDebugString();
    EXPECT_TRUE(absl::StrContains(status.message(), c.field)) << status;
  }
  s = Async();
  s.set_staleness_lr(UpdateSpec::INVERSE);
  s.set_delay_compensation(2);
  s.set_delay_compensation_adaptive(true);
  s.set_retained_versions(StalenessPolicy::kMaxRetainedVersions);
  EXPECT_TRUE(ValidateStalenessSpec(s).ok());
  UpdateSpec sync;
  sync.set_mode(UpdateSpec::SYNC);
  EXPECT_TRUE(ValidateStalenessSpec(sync).ok());
}

TEST(UpdateHistoryTest, CountsUpdatesThatTouchedThePushsRows) {
  UpdateHistory history;
  // Without a history every update since the base counts.
  EXPECT_EQ(history.Staleness(3, 7, 0, 10), 4);
  history.Enable();
  // Versions 1..6: a push in three row chunks per step, steps of two workers.
  int64_t version = 0;
  for (int step = 0; step < 2; ++step) {
    history.Record(++version, 0, 10);
    history.Record(++version, 10, 20);
    history.Record(++version, 20, 30);
  }
  EXPECT_EQ(history.Staleness(6, 6, 0, 30), 0);
  // A chunk of rows [20, 30) computed at version 3: only version 6 touched its rows.
  EXPECT_EQ(history.Staleness(3, 6, 20, 30), 1);
  EXPECT_EQ(history.Staleness(3, 5, 20, 30), 0);  // its own step's earlier chunks don't count
  EXPECT_EQ(history.Staleness(1, 6, 0, 10), 1);
  EXPECT_EQ(history.Staleness(1, 6, 5, 25), 5);  // every chunk overlaps rows [5, 25)
  // Versions before the history (and after a Clear) count as touching.
  history.Clear();
  history.Record(7, 0, 1);
  EXPECT_EQ(history.Staleness(4, 7, 5, 6), 2);  // 5, 6 unknown; 7 does not touch
}

TEST(UpdateHistoryTest, ForgetsThePastBeyondItsCapacity) {
  UpdateHistory history;
  history.Enable();
  const int64_t n = UpdateHistory::kCapacity + 10;
  for (int64_t v = 1; v <= n; ++v) history.Record(v, v % 2, v % 2 + 1);  // rows 0, 1 in turn
  // From version 0: the 10 oldest are forgotten and count; of the kept, half touch row 0.
  EXPECT_EQ(history.Staleness(0, n, 0, 1), 10 + UpdateHistory::kCapacity / 2);
  EXPECT_EQ(history.Staleness(n - 4, n, 0, 1), 2);
}

// Sets rows [begin, end) of `params` to `value` (copying the blocks someone else holds).
void Write(ParamBlocks* params, int64_t begin, int64_t end, float value) {
  params->Writable(begin, end);
  params->ForEachRun(begin, end, [value](int64_t, float* v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) v[i] = value;
  });
}

TEST(RetainedVersionsTest, KeepsTheLastVersionsAndCountsTheirBlocks) {
  // Rows of 1 << 16 floats (256 KiB): a block of 1 MiB holds 4 rows, 8 rows make 2 blocks.
  const int64_t width = int64_t{1} << 16;
  ParamBlocks params(8, width);
  ASSERT_EQ(params.num_blocks(), 2);
  Write(&params, 0, 8, 0.0f);
  RetainedVersions retained(2);
  bool exact = true;
  EXPECT_EQ(retained.Find(0, &exact), nullptr);
  EXPECT_EQ(retained.ExtraBytes(params), 0);

  for (int v = 0; v < 3; ++v) {
    retained.Retain(v, params);
    Write(&params, 0, 1, static_cast<float>(v + 1));  // version v + 1 changes block 0 only
  }
  EXPECT_EQ(retained.size(), 2);  // versions 1 and 2
  const ParamBlocks* at2 = retained.Find(2, &exact);
  ASSERT_NE(at2, nullptr);
  EXPECT_TRUE(exact);
  EXPECT_EQ(at2->Row(0)[0], 2.0f);
  EXPECT_EQ(params.Row(0)[0], 3.0f);
  const ParamBlocks* at1 = retained.Find(1, &exact);
  ASSERT_NE(at1, nullptr);
  EXPECT_EQ(at1->Row(0)[0], 1.0f);
  // Version 0 is gone: the oldest kept stands in.
  EXPECT_EQ(retained.Find(0, &exact), at1);
  EXPECT_FALSE(exact);
  EXPECT_EQ(retained.Find(3, &exact), nullptr);
  // Two old copies of block 0; block 1 is shared by all.
  EXPECT_EQ(retained.ExtraBytes(params), 2 * params.block_bytes(0));

  // A version that does not follow starts afresh; the same version again replaces.
  retained.Retain(7, params);
  EXPECT_EQ(retained.size(), 1);
  retained.Retain(7, params);
  EXPECT_EQ(retained.size(), 1);
  EXPECT_EQ(retained.ExtraBytes(params), 0);
  retained.Clear();
  EXPECT_EQ(retained.Find(7, &exact), nullptr);
}

TEST(DelayCompensateTest, MatchesTheFormula) {
  StalenessPolicy policy;
  policy.lambda = 0.5f;
  const std::vector<float> g = {1.0f, -2.0f, 0.5f, 0.0f};
  const std::vector<float> now = {1.0f, 1.0f, -1.0f, 3.0f};
  const std::vector<float> bak = {0.0f, 2.0f, -1.0f, 0.0f};
  std::vector<float> out(4);
  DelayCompensate(policy, 4, g.data(), now.data(), bak.data(), nullptr, out.data());
  EXPECT_EQ(out, (std::vector<float>{1.0f + 0.5f, -2.0f - 2.0f, 0.5f, 0.0f}));

  DelayCompensate(policy, 4, g.data(), now.data(), nullptr, nullptr, out.data());
  EXPECT_EQ(out, g);

  // DC-ASGD-a: the mean square moves first, then scales lambda.
  policy.adaptive = true;
  std::vector<float> ms = {4.0f, 0.0f, 1.0f, 0.0f};
  DelayCompensate(policy, 4, g.data(), now.data(), bak.data(), ms.data(), out.data());
  for (int i = 0; i < 4; ++i) {
    const float want_ms = 0.95f * std::vector<float>{4.0f, 0.0f, 1.0f, 0.0f}[i] +
                          0.05f * g[i] * g[i];
    EXPECT_FLOAT_EQ(ms[i], want_ms) << i;
    const float l = 0.5f / (std::sqrt(want_ms) + 1e-7f);
    EXPECT_FLOAT_EQ(out[i], g[i] + l * g[i] * g[i] * (now[i] - bak[i])) << i;
  }
  // Only the mean square.
  DelayCompensate(policy, 4, g.data(), now.data(), nullptr, ms.data(), nullptr);
  EXPECT_FLOAT_EQ(ms[0], 0.95f * (0.95f * 4.0f + 0.05f) + 0.05f);
}

}  // namespace
}  // namespace shardps
