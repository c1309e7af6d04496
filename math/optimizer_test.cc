#include "math/optimizer.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

constexpr int kN = 37;  // not a multiple of any SIMD width: exercises the scalar tail
constexpr int kSteps = 5;

// A deterministic gradient for step `t`, element `i`, of mixed signs and magnitudes.
float Grad(int t, int i) { return std::sin(0.7f * i + 1.3f * t) * (1.0f + 0.1f * i); }

std::vector<float> InitialParams() {
  std::vector<float> p(kN);
  for (int i = 0; i < kN; ++i) p[i] = 0.01f * i - 0.2f;
  return p;
}

struct State {
  std::vector<float> params = InitialParams();
  std::vector<std::vector<float>> slots;
};

State Init(const Optimizer& opt) {
  State s;
  for (int k = 0; k < opt.num_slots(); ++k) {
    s.slots.emplace_back(kN, opt.initial_slot_value(k));
  }
  return s;
}

void StepDense(const Optimizer& opt, int t, State* s) {
  std::vector<float> g(kN);
  for (int i = 0; i < kN; ++i) g[i] = Grad(t, i);
  std::vector<float*> slots;
  for (auto& v : s->slots) slots.push_back(v.data());
  opt.ApplyDense(t, g, s->params.data(), slots);
}

std::unique_ptr<Optimizer> Make(const OptimizerSpec& spec) {
  auto opt = Optimizer::Create(spec);
  EXPECT_TRUE(opt.ok()) << opt.status();
  return *std::move(opt);
}

void ExpectClose(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "element " << i;
  }
}

TEST(OptimizerTest, Sgd) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::SGD);
  spec.set_learning_rate(0.1);
  auto opt = Make(spec);
  EXPECT_EQ(opt->num_slots(), 0);
  State s = Init(*opt);
  const std::vector<float> init = InitialParams();
  std::vector<double> p(init.begin(), init.end());
  for (int t = 1; t <= kSteps; ++t) {
    StepDense(*opt, t, &s);
    for (int i = 0; i < kN; ++i) p[i] -= 0.1 * Grad(t, i);
  }
  ExpectClose(s.params, p);
}

void CheckMomentum(bool nesterov) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::MOMENTUM);
  spec.set_learning_rate(0.05);
  spec.set_momentum(0.9);
  spec.set_nesterov(nesterov);
  auto opt = Make(spec);
  EXPECT_EQ(opt->num_slots(), 1);
  State s = Init(*opt);
  const std::vector<float> init = InitialParams();
  std::vector<double> p(init.begin(), init.end()), v(kN, 0.0);
  for (int t = 1; t <= kSteps; ++t) {
    StepDense(*opt, t, &s);
    for (int i = 0; i < kN; ++i) {
      const double g = Grad(t, i);
      v[i] = 0.9 * v[i] - 0.05 * g;
      p[i] += nesterov ? 0.9 * v[i] - 0.05 * g : v[i];
    }
  }
  ExpectClose(s.params, p);
  ExpectClose(s.slots[0], v);
}

TEST(OptimizerTest, Momentum) { CheckMomentum(false); }
TEST(OptimizerTest, NesterovMomentum) { CheckMomentum(true); }

TEST(OptimizerTest, AdagradWithTfDefaults) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAGRAD);
  spec.set_learning_rate(0.1);  // initial_accumulator_value 0.1 and epsilon 1e-7 by default
  auto opt = Make(spec);
  EXPECT_EQ(opt->num_slots(), 1);
  EXPECT_FLOAT_EQ(opt->initial_slot_value(0), 0.1f);
  State s = Init(*opt);
  const std::vector<float> init = InitialParams();
  std::vector<double> p(init.begin(), init.end()), acc(kN, 0.1);
  for (int t = 1; t <= kSteps; ++t) {
    StepDense(*opt, t, &s);
    for (int i = 0; i < kN; ++i) {
      const double g = Grad(t, i);
      acc[i] += g * g;
      p[i] -= 0.1 * g / (std::sqrt(acc[i]) + 1e-7);
    }
  }
  ExpectClose(s.params, p);
  ExpectClose(s.slots[0], acc);
}

TEST(OptimizerTest, AdamMatchesKerasFormula) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAM);
  spec.set_learning_rate(0.01);
  spec.set_beta1(0.8);
  spec.set_epsilon(1e-3);  // beta2 defaults to 0.999
  auto opt = Make(spec);
  EXPECT_EQ(opt->num_slots(), 2);
  State s = Init(*opt);
  const std::vector<float> init = InitialParams();
  std::vector<double> p(init.begin(), init.end()), m(kN, 0.0), v(kN, 0.0);
  for (int t = 1; t <= kSteps; ++t) {
    StepDense(*opt, t, &s);
    const double lr_t = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.8, t));
    for (int i = 0; i < kN; ++i) {
      const double g = Grad(t, i);
      m[i] = 0.8 * m[i] + 0.2 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-3);
    }
  }
  ExpectClose(s.params, p);
  ExpectClose(s.slots[0], m);
  ExpectClose(s.slots[1], v);
}

TEST(OptimizerTest, NoopChangesNothing) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::NOOP);
  spec.set_learning_rate(1);
  auto opt = Make(spec);
  State s = Init(*opt);
  StepDense(*opt, 1, &s);
  EXPECT_EQ(s.params, InitialParams());
}

// The row-sparse apply touches only the listed rows, each as a dense apply of that row.
TEST(OptimizerTest, RowsAreLazyAndMatchDense) {
  constexpr int kRows = 6;
  constexpr int kWidth = 5;
  for (auto type : {OptimizerSpec::SGD, OptimizerSpec::MOMENTUM, OptimizerSpec::ADAGRAD,
                    OptimizerSpec::ADAM, OptimizerSpec::FTRL}) {
    OptimizerSpec spec;
    spec.set_type(type);
    spec.set_learning_rate(0.1);
    spec.set_momentum(0.5);
    auto opt = Make(spec);
    std::vector<float> params(kRows * kWidth, 1.0f);
    std::vector<std::vector<float>> slots;
    for (int k = 0; k < opt->num_slots(); ++k) {
      slots.emplace_back(kRows * kWidth, opt->initial_slot_value(k));
    }
    std::vector<float*> slot_ptrs;
    for (auto& v : slots) slot_ptrs.push_back(v.data());
    std::vector<RowBlocks> slot_rows;
    for (float* const& base : slot_ptrs) slot_rows.push_back(RowBlocks::Contiguous(&base, kWidth));
    const std::vector<int64_t> rows = {4, 1};
    std::vector<float> grad(rows.size() * kWidth);
    for (size_t i = 0; i < grad.size(); ++i) grad[i] = 0.5f + i;
    for (int t = 1; t <= 3; ++t) {
      float* base = params.data();
      opt->ApplyRows(t, rows, grad.data(), RowBlocks::Contiguous(&base, kWidth), slot_rows);
    }

    // Reference: a dense apply on one row-sized buffer per listed row.
    for (size_t k = 0; k < rows.size(); ++k) {
      std::vector<float> p(kWidth, 1.0f);
      std::vector<std::vector<float>> s;
      for (int j = 0; j < opt->num_slots(); ++j) s.emplace_back(kWidth, opt->initial_slot_value(j));
      std::vector<float*> sp;
      for (auto& v : s) sp.push_back(v.data());
      for (int t = 1; t <= 3; ++t) {
        opt->ApplyDense(t, absl::MakeConstSpan(grad.data() + k * kWidth, kWidth), p.data(), sp);
      }
      for (int c = 0; c < kWidth; ++c) {
        EXPECT_EQ(params[rows[k] * kWidth + c], p[c]) << "type " << type;
      }
    }
    for (int r : {0, 2, 3, 5}) {
      for (int c = 0; c < kWidth; ++c) EXPECT_EQ(params[r * kWidth + c], 1.0f);
      for (int j = 0; j < opt->num_slots(); ++j) {
        EXPECT_EQ(slots[j][r * kWidth], opt->initial_slot_value(j));
      }
    }
  }
}

TEST(OptimizerTest, RejectsInvalidHyperparameters) {
  auto expect_invalid = [](OptimizerSpec spec, const char* field) {
    const absl::Status status = Optimizer::Validate(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << spec.DebugString();
    EXPECT_NE(status.message().find(field), std::string::npos) << status;
    EXPECT_FALSE(Optimizer::Create(spec).ok());
  };
  OptimizerSpec base;
  base.set_learning_rate(0.1);

  OptimizerSpec s = base;
  s.set_learning_rate(0);
  expect_invalid(s, "learning_rate");
  s.set_learning_rate(-1);
  expect_invalid(s, "learning_rate");
  s.set_learning_rate(INFINITY);
  expect_invalid(s, "learning_rate");
  s.set_learning_rate(NAN);
  expect_invalid(s, "learning_rate");

  s = base;
  s.set_type(OptimizerSpec::MOMENTUM);
  s.set_momentum(1.0);
  expect_invalid(s, "momentum");
  s.set_momentum(-0.1);
  expect_invalid(s, "momentum");

  s = base;
  s.set_type(OptimizerSpec::ADAM);
  s.set_beta1(1.0);
  expect_invalid(s, "beta1");
  s.set_beta1(0.9);
  s.set_beta2(1.5);
  expect_invalid(s, "beta2");
  s.set_beta2(0);
  s.set_epsilon(-1e-8);
  expect_invalid(s, "epsilon");

  s = base;
  s.set_type(OptimizerSpec::ADAGRAD);
  s.set_initial_accumulator_value(-1);
  expect_invalid(s, "initial_accumulator_value");

  s = base;
  s.set_type(static_cast<OptimizerSpec::Type>(99));
  expect_invalid(s, "type");

  for (auto type : {OptimizerSpec::SGD, OptimizerSpec::MOMENTUM, OptimizerSpec::ADAGRAD,
                    OptimizerSpec::ADAM, OptimizerSpec::NOOP, OptimizerSpec::FTRL}) {
    s = base;
    s.set_type(type);
    EXPECT_TRUE(Optimizer::Create(s).ok()) << type;
  }
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// Keras' ExponentialDecay on top of any optimizer: SGD's step t moves by
// lr * rate^((t-1)/steps) * g, floored exponent when staircase.
TEST(OptimizerDecayTest, ExponentialDecayScalesTheLearningRate) {
  for (bool staircase : {false, true}) {
    OptimizerSpec spec;
    spec.set_type(OptimizerSpec::SGD);
    spec.set_learning_rate(0.5);
    spec.set_decay_rate(0.25);
    spec.set_decay_steps(2);
    spec.set_staircase(staircase);
    auto opt = Optimizer::Create(spec);
    ASSERT_TRUE(opt.ok()) << opt.status();
    float p = 0.0f;
    double expected = 0.0;
    std::vector<float> g = {1.0f};
    for (int t = 1; t <= 5; ++t) {
      (*opt)->ApplyDense(t, g, &p, {});
      double exponent = (t - 1) / 2.0;
      if (staircase) exponent = std::floor(exponent);
      expected -= 0.5 * std::pow(0.25, exponent);
      EXPECT_NEAR(p, expected, 1e-6) << "t=" << t << " staircase=" << staircase;
    }
  }
}

// A scaled update multiplies the learning rate after decay (Adam: lr_t) and nothing else;
// a scale of 1 is bit-identical to the plain call, dense and by rows.
TEST(OptimizerScaleTest, LrScaleMultipliesTheDecayedRate) {
  for (OptimizerSpec::Type type : {OptimizerSpec::SGD, OptimizerSpec::ADAM}) {
    OptimizerSpec spec;
    spec.set_type(type);
    spec.set_learning_rate(0.05);
    spec.set_decay_rate(0.5);
    spec.set_decay_steps(1);
    auto opt = Make(spec);
    State scaled = Init(*opt), plain = Init(*opt), unit = Init(*opt);
    std::vector<double> p(scaled.params.begin(), scaled.params.end()), m(kN, 0.0), v(kN, 0.0);
    for (int t = 1; t <= kSteps; ++t) {
      const double scale = 1.0 / t;
      std::vector<float> g(kN);
      for (int i = 0; i < kN; ++i) g[i] = Grad(t, i);
      auto slot_ptrs = [](State* s) {
        std::vector<float*> out;
        for (auto& x : s->slots) out.push_back(x.data());
        return out;
      };
      opt->ApplyDenseScaled(t, scale, g, scaled.params.data(), slot_ptrs(&scaled));
      opt->ApplyDenseScaled(t, 1.0, g, unit.params.data(), slot_ptrs(&unit));
      opt->ApplyDense(t, g, plain.params.data(), slot_ptrs(&plain));
      const double decayed = 0.05 * std::pow(0.5, t - 1) * scale;
      for (int i = 0; i < kN; ++i) {
        const double gi = g[i];
        if (type == OptimizerSpec::SGD) {
          p[i] -= decayed * gi;
        } else {
          m[i] = 0.9 * m[i] + 0.1 * gi;
          v[i] = 0.999 * v[i] + 0.001 * gi * gi;
          const double lr_t = decayed * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
          p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-7);
        }
      }
    }
    ExpectClose(scaled.params, p);
    EXPECT_EQ(unit.params, plain.params);
    EXPECT_EQ(unit.slots, plain.slots);
  }
}

TEST(OptimizerScaleTest, RowsScaleAsDense) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAM);
  spec.set_learning_rate(0.01);
  auto opt = Make(spec);
  constexpr int kWidth = 3;
  std::vector<float> dense(2 * kWidth, 0.5f), rows(2 * kWidth, 0.5f);
  std::vector<float> dm(2 * kWidth), dv(2 * kWidth), rm(2 * kWidth), rv(2 * kWidth);
  std::vector<float> g(2 * kWidth);
  for (int i = 0; i < 2 * kWidth; ++i) g[i] = Grad(1, i);
  std::vector<float*> dense_slots = {dm.data(), dv.data()};
  opt->ApplyDenseScaled(1, 0.25, g, dense.data(), dense_slots);
  float* base = rows.data();
  float* m_base = rm.data();
  float* v_base = rv.data();
  const std::vector<RowBlocks> slots = {RowBlocks::Contiguous(&m_base, kWidth),
                                        RowBlocks::Contiguous(&v_base, kWidth)};
  const std::vector<int64_t> ids = {0, 1};
  opt->ApplyRowsScaled(1, 0.25, ids, g.data(), RowBlocks::Contiguous(&base, kWidth), slots);
  EXPECT_EQ(dense, rows);
  EXPECT_EQ(dm, rm);
  EXPECT_EQ(dv, rv);
}

TEST(OptimizerDecayTest, RejectsBadDecay) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAM);
  spec.set_learning_rate(0.1);
  spec.set_decay_rate(0.5);
  EXPECT_NE(Optimizer::Create(spec).status().message().find("decay_steps"), std::string::npos);
  spec.set_decay_steps(10);
  spec.set_decay_rate(2.0);
  EXPECT_NE(Optimizer::Create(spec).status().message().find("decay_rate"), std::string::npos);
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

OptimizerSpec AdamSpec(double epsilon = 0) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAM);
  spec.set_learning_rate(0.01);
  spec.set_epsilon(epsilon);
  return spec;
}

// Adam's vector lanes and its padded tail give every element the same arithmetic, so an
// update split at any point (chunks, threads) is bit-identical to the whole update.
TEST(OptimizerTest, AdamSplitAnywhereIsBitIdentical) {
  auto opt = Make(AdamSpec());
  State whole = Init(*opt);
  for (int t = 1; t <= kSteps; ++t) StepDense(*opt, t, &whole);
  for (int cut : {1, 3, 8, 13, 29}) {
    State split = Init(*opt);
    for (int t = 1; t <= kSteps; ++t) {
      std::vector<float> g(kN);
      for (int i = 0; i < kN; ++i) g[i] = Grad(t, i);
      for (auto [begin, end] : {std::pair<int, int>{0, cut}, std::pair<int, int>{cut, kN}}) {
        std::vector<float*> slots;
        for (auto& v : split.slots) slots.push_back(v.data() + begin);
        opt->ApplyDense(t, absl::MakeConstSpan(g.data() + begin, end - begin),
                        split.params.data() + begin, slots);
      }
    }
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(split.params[i], whole.params[i]) << "cut " << cut << " element " << i;
    }
  }
}

// Edge values: a gradient whose square overflows leaves the parameter where it was (as
// m / inf = 0 does), and a tiny epsilon with a zero gradient gives no NaN.
TEST(OptimizerTest, AdamEdgeValuesStayFinite) {
  for (double epsilon : {1e-7, 1e-40}) {
    auto opt = Make(AdamSpec(epsilon));
    State s = Init(*opt);
    std::vector<float> g(kN, 0.0f);
    g[3] = 3e38f;   // g * g overflows to inf
    g[20] = 1e-30f; // v underflows towards denormals
    std::vector<float*> slots;
    for (auto& v : s.slots) slots.push_back(v.data());
    const std::vector<float> before = s.params;
    opt->ApplyDense(1, g, s.params.data(), slots);
    for (int i = 0; i < kN; ++i) {
      ASSERT_TRUE(std::isfinite(s.params[i])) << "epsilon " << epsilon << " element " << i;
    }
    EXPECT_EQ(s.params[3], before[3]);
    EXPECT_EQ(s.params[0], before[0]);  // zero gradient: no change
  }
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

TEST(OptimizerTest, SlotNames) {
  struct Case {
    OptimizerSpec::Type type;
    std::vector<std::string> names;
  };
  const Case cases[] = {{OptimizerSpec::SGD, {}},
                        {OptimizerSpec::NOOP, {}},
                        {OptimizerSpec::MOMENTUM, {"momentum"}},
                        {OptimizerSpec::ADAGRAD, {"accumulator"}},
                        {OptimizerSpec::ADAM, {"adam_m", "adam_v"}},
                        {OptimizerSpec::FTRL, {"accumulator", "linear"}}};
  for (const Case& c : cases) {
    OptimizerSpec spec;
    spec.set_type(c.type);
    spec.set_learning_rate(0.1);
    auto opt = Optimizer::Create(spec);
    ASSERT_TRUE(opt.ok());
    ASSERT_EQ((*opt)->num_slots(), static_cast<int>(c.names.size())) << c.type;
    for (int s = 0; s < (*opt)->num_slots(); ++s) {
      EXPECT_EQ((*opt)->slot_name(s), c.names[s]) << c.type;
    }
  }
}

// Slots in blocks of rows (as a shard keeps them) are updated as contiguous slots are.
TEST(OptimizerTest, RowsWithBlockedSlotsMatchContiguousSlots) {
  constexpr int kRows = 6;
  constexpr int kWidth = 3;
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::ADAM);
  spec.set_learning_rate(0.1);
  auto opt = Optimizer::Create(spec);
  ASSERT_TRUE(opt.ok());
  const std::vector<int64_t> rows = {5, 0, 3};
  std::vector<float> grad(rows.size() * kWidth);
  for (size_t i = 0; i < grad.size(); ++i) grad[i] = 0.25f * static_cast<float>(i) - 1.0f;

  // Contiguous: one buffer each.
  std::vector<float> params(kRows * kWidth, 1.0f), m(kRows * kWidth, 0.0f), v = m;
  float* p_base = params.data();
  float* m_base = m.data();
  float* v_base = v.data();
  const RowBlocks slot_rows[] = {RowBlocks::Contiguous(&m_base, kWidth),
                                 RowBlocks::Contiguous(&v_base, kWidth)};
  // Blocked: two rows per block, each block its own allocation.
  std::vector<std::vector<float>> bp(3, std::vector<float>(2 * kWidth, 1.0f));
  std::vector<std::vector<float>> bm(3, std::vector<float>(2 * kWidth, 0.0f)), bv = bm;
  float* pp[3] = {bp[0].data(), bp[1].data(), bp[2].data()};
  float* mp[3] = {bm[0].data(), bm[1].data(), bm[2].data()};
  float* vp[3] = {bv[0].data(), bv[1].data(), bv[2].data()};
  const RowBlocks blocked_slots[] = {RowBlocks{mp, 1, kWidth}, RowBlocks{vp, 1, kWidth}};
  for (int t = 1; t <= 3; ++t) {
    (*opt)->ApplyRows(t, rows, grad.data(), RowBlocks::Contiguous(&p_base, kWidth), slot_rows);
    (*opt)->ApplyRows(t, rows, grad.data(), RowBlocks{pp, 1, kWidth}, blocked_slots);
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kWidth; ++c) {
      const int i = r * kWidth + c;
      EXPECT_EQ(bp[r / 2][(r % 2) * kWidth + c], params[i]) << r << "," << c;
      EXPECT_EQ(bm[r / 2][(r % 2) * kWidth + c], m[i]) << r << "," << c;
      EXPECT_EQ(bv[r / 2][(r % 2) * kWidth + c], v[i]) << r << "," << c;
    }
  }
  EXPECT_NE(params[5 * kWidth], 1.0f);
  EXPECT_EQ(params[1 * kWidth], 1.0f);
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// FTRL-Proximal against TF's published formula (ResourceApplyFtrlV2's documentation, with
// Keras' beta folded into l2), computed here in double.
struct FtrlReference {
  double lr, power, l1, l2, shrinkage, beta;
  std::vector<double> p, acc, linear;

  void Step(const std::vector<float>& g) {
    const double l2_adj = l2 + beta / (2 * lr);
    for (size_t i = 0; i < p.size(); ++i) {
      const double gs = g[i] + 2 * shrinkage * p[i];
      const double acc_new = acc[i] + double{g[i]} * g[i];
      linear[i] += gs - (std::pow(acc_new, -power) - std::pow(acc[i], -power)) / lr * p[i];
      const double quadratic = std::pow(acc_new, -power) / lr + 2 * l2_adj;
      p[i] = std::abs(linear[i]) > l1
                 ? ((linear[i] < 0 ? -l1 : l1) - linear[i]) / quadratic
                 : 0.0;
      acc[i] = acc_new;
    }
  }
};

struct FtrlCase {
  double power;  // NAN: unset (the default, -0.5)
  double l1, l2, shrinkage, beta, initial_accumulator;
};

OptimizerSpec FtrlSpec(const FtrlCase& c) {
  OptimizerSpec spec;
  spec.set_type(OptimizerSpec::FTRL);
  spec.set_learning_rate(0.2);
  if (!std::isnan(c.power)) spec.set_learning_rate_power(c.power);
  spec.set_l1(c.l1);
  spec.set_l2(c.l2);
  spec.set_l2_shrinkage(c.shrinkage);
  spec.set_beta(c.beta);
  spec.set_initial_accumulator_value(c.initial_accumulator);
  return spec;
}

TEST(OptimizerFtrlTest, MatchesTfFormula) {
  const FtrlCase cases[] = {
      {NAN, 0, 0, 0, 0, 0},            // TF defaults: power -0.5, accumulator 0.1
      {-0.5, 0.05, 0, 0, 0, 0},        // l1
      {-0.5, 0, 0.3, 0, 0, 0},         // l2
      {-0.5, 0.01, 0.1, 0.2, 0, 0.5},  // shrinkage (TF's V2 op)
      {-0.5, 0, 0.1, 0, 0.7, 0},       // beta
      {-0.75, 0.02, 0.05, 0, 0, 0.3},  // another power
      {0.0, 0.01, 0.1, 0.05, 0, 0},    // power 0: a fixed per-coordinate rate
      {-1.0, 0, 0, 0, 0, 1.0},
  };
  for (const FtrlCase& c : cases) {
    SCOPED_TRACE(FtrlSpec(c).ShortDebugString());
    auto opt = Make(FtrlSpec(c));
    ASSERT_EQ(opt->num_slots(), 2);
    const double acc0 = c.initial_accumulator == 0 ? 0.1 : c.initial_accumulator;
    EXPECT_FLOAT_EQ(opt->initial_slot_value(0), static_cast<float>(acc0));
    EXPECT_EQ(opt->initial_slot_value(1), 0.0f);
    State s = Init(*opt);
    const std::vector<float> init = InitialParams();
    FtrlReference ref{0.2,
                      std::isnan(c.power) ? -0.5 : c.power,
                      c.l1,
                      c.l2,
                      c.shrinkage,
                      c.beta,
                      std::vector<double>(init.begin(), init.end()),
                      std::vector<double>(kN, acc0),
                      std::vector<double>(kN, 0.0)};
    for (int t = 1; t <= kSteps; ++t) {
      StepDense(*opt, t, &s);
      std::vector<float> g(kN);
      for (int i = 0; i < kN; ++i) g[i] = Grad(t, i);
      ref.Step(g);
    }
    ExpectClose(s.params, ref.p);
    ExpectClose(s.slots[0], ref.acc);
    ExpectClose(s.slots[1], ref.linear);
  }
}

// l1 zeroes the weights whose |linear| stays below it; a larger l1 zeroes more of them.
TEST(OptimizerFtrlTest, L1ZeroesSmallWeights) {
  int zeros_before = -1;
  for (double l1 : {0.0, 0.5, 2.0, 1e3}) {
    auto opt = Make(FtrlSpec({-0.5, l1, 0, 0, 0, 0}));
    State s = Init(*opt);
    for (int t = 1; t <= kSteps; ++t) StepDense(*opt, t, &s);
    int zeros = 0;
    for (int i = 0; i < kN; ++i) {
      if (s.params[i] == 0.0f) {
        ++zeros;
        EXPECT_LE(std::abs(s.slots[1][i]), l1) << "element " << i;
      }
    }
    EXPECT_GE(zeros, zeros_before) << "l1 " << l1;
    zeros_before = zeros;
    if (l1 == 0.0) {
      EXPECT_EQ(zeros, 0);
    }
    if (l1 == 0.5) {
      EXPECT_GT(zeros, 0);  // some but not all: the test sees l1 at work
      EXPECT_LT(zeros, kN);
    }
    if (l1 == 1e3) {
      EXPECT_EQ(zeros, kN);
    }
  }
}

// The row-sparse apply moves only the given rows (accumulator and linear included), each as
// the dense formula on that row; a caller sums duplicate ids first (as PushRows does), which
// is one update with the summed gradient, not two updates.
TEST(OptimizerFtrlTest, RowsTouchOnlyGivenRowsWithDuplicatesSummed) {
  constexpr int kRows = 5;
  constexpr int kWidth = 3;
  const FtrlCase c{-0.5, 0.01, 0.1, 0.05, 0.2, 0};
  auto opt = Make(FtrlSpec(c));
  std::vector<float> params(kRows * kWidth), acc(kRows * kWidth, 0.1f), lin(kRows * kWidth);
  for (size_t i = 0; i < params.size(); ++i) params[i] = 0.05f * i - 0.3f;
  const std::vector<float> params0 = params;
  float* p_base = params.data();
  float* a_base = acc.data();
  float* l_base = lin.data();
  const RowBlocks slots[] = {RowBlocks::Contiguous(&a_base, kWidth),
                             RowBlocks::Contiguous(&l_base, kWidth)};
  // A push of ids {3, 1, 3}: the caller sums the two rows for id 3.
  const std::vector<int64_t> pushed = {3, 1, 3};
  std::vector<float> pushed_grad(pushed.size() * kWidth);
  for (size_t i = 0; i < pushed_grad.size(); ++i) pushed_grad[i] = std::sin(1.0f + i);
  const std::vector<int64_t> rows = {3, 1};
  std::vector<float> grad(rows.size() * kWidth);
  for (int col = 0; col < kWidth; ++col) {
    grad[col] = pushed_grad[col] + pushed_grad[2 * kWidth + col];
    grad[kWidth + col] = pushed_grad[kWidth + col];
  }
  std::vector<FtrlReference> refs;
  for (int64_t r : rows) {
    refs.push_back({0.2, -0.5, c.l1, c.l2, c.shrinkage, c.beta,
                    std::vector<double>(params0.begin() + r * kWidth,
                                        params0.begin() + (r + 1) * kWidth),
                    std::vector<double>(kWidth, 0.1), std::vector<double>(kWidth, 0.0)});
  }
  for (int t = 1; t <= 3; ++t) {
    opt->ApplyRows(t, rows, grad.data(), RowBlocks::Contiguous(&p_base, kWidth), slots);
    for (size_t k = 0; k < rows.size(); ++k) {
      refs[k].Step(std::vector<float>(grad.begin() + k * kWidth, grad.begin() + (k + 1) * kWidth));
    }
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    const int64_t r = rows[k];
    auto slice = [&](const std::vector<float>& v) {
      return std::vector<float>(v.begin() + r * kWidth, v.begin() + (r + 1) * kWidth);
    };
    ExpectClose(slice(params), refs[k].p);
    ExpectClose(slice(acc), refs[k].acc);
    ExpectClose(slice(lin), refs[k].linear);
  }
  for (int r : {0, 2, 4}) {
    for (int col = 0; col < kWidth; ++col) {
      const int i = r * kWidth + col;
      EXPECT_EQ(params[i], params0[i]) << "row " << r;
      EXPECT_EQ(acc[i], 0.1f) << "row " << r;
      EXPECT_EQ(lin[i], 0.0f) << "row " << r;
    }
  }
}

TEST(OptimizerFtrlTest, RejectsInvalidHyperparameters) {
  auto expect_invalid = [](const OptimizerSpec& spec, const char* field) {
    const absl::Status status = Optimizer::Validate(spec);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << spec.ShortDebugString();
    EXPECT_NE(status.message().find(absl::StrCat("optimizer.", field)), std::string::npos)
        << status;
    EXPECT_FALSE(Optimizer::Create(spec).ok());
  };
  const FtrlCase ok{-0.5, 0, 0, 0, 0, 0};
  EXPECT_TRUE(Optimizer::Create(FtrlSpec(ok)).ok());
  FtrlCase c = ok;
  c.power = 0.1;
  expect_invalid(FtrlSpec(c), "learning_rate_power");
  c.power = -INFINITY;
  expect_invalid(FtrlSpec(c), "learning_rate_power");
  c = ok;
  c.l1 = -0.1;
  expect_invalid(FtrlSpec(c), "l1");
  c = ok;
  c.l2 = -1;
  expect_invalid(FtrlSpec(c), "l2");
  c = ok;
  c.l2 = NAN;
  expect_invalid(FtrlSpec(c), "l2");
  c = ok;
  c.shrinkage = -1e-3;
  expect_invalid(FtrlSpec(c), "l2_shrinkage");
  c = ok;
  c.beta = -2;
  expect_invalid(FtrlSpec(c), "beta");
  c = ok;
  c.initial_accumulator = -0.5;
  expect_invalid(FtrlSpec(c), "initial_accumulator_value");
  OptimizerSpec spec = FtrlSpec(ok);
  spec.set_learning_rate(0);
  expect_invalid(spec, "learning_rate");
}

TEST(OptimizerFtrlTest, SlotNames) {
  auto opt = Make(FtrlSpec({NAN, 0, 0, 0, 0, 0}));
  EXPECT_EQ(opt->slot_name(0), "accumulator");
  EXPECT_EQ(opt->slot_name(1), "linear");
}

// Row-sparse Adagrad and lazy Adam against their formulas: the given rows move (Adam's t is
// the shard's update count, whatever rows the update touched), the other rows' parameters and
// slots stay exactly where they were (Adam's moments do not decay).
TEST(OptimizerRowsTest, AdagradAndLazyAdamMatchFormulaAndLeaveOtherRows) {
  constexpr int kRows = 6;
  constexpr int kWidth = 4;
  for (auto type : {OptimizerSpec::ADAGRAD, OptimizerSpec::ADAM}) {
    SCOPED_TRACE(type);
    OptimizerSpec spec;
    spec.set_type(type);
    spec.set_learning_rate(0.05);
    auto opt = Make(spec);
    const float s0 = type == OptimizerSpec::ADAGRAD ? 0.1f : 0.0f;
    std::vector<float> params(kRows * kWidth);
    for (size_t i = 0; i < params.size(); ++i) params[i] = 0.1f * i - 1.0f;
    const std::vector<float> params0 = params;
    std::vector<std::vector<float>> slots(opt->num_slots(),
                                          std::vector<float>(kRows * kWidth, s0));
    std::vector<float*> bases;
    for (auto& v : slots) bases.push_back(v.data());
    std::vector<RowBlocks> slot_rows;
    for (float* const& b : bases) slot_rows.push_back(RowBlocks::Contiguous(&b, kWidth));
    float* p_base = params.data();
    // Reference state, per element.
    std::vector<double> p(params0.begin(), params0.end()), a(kRows * kWidth, s0),
        m(kRows * kWidth, 0.0), v(kRows * kWidth, 0.0);
    // Step t touches different rows; row 2 is never touched.
    const std::vector<std::vector<int64_t>> touched = {{0, 5}, {5, 3}, {1}, {0, 3, 4}};
    for (int t = 1; t <= static_cast<int>(touched.size()); ++t) {
      const auto& rows = touched[t - 1];
      std::vector<float> g(rows.size() * kWidth);
      for (size_t i = 0; i < g.size(); ++i) g[i] = Grad(t, static_cast<int>(i));
      opt->ApplyRows(t, rows, g.data(), RowBlocks::Contiguous(&p_base, kWidth), slot_rows);
      const double lr_t =
          0.05 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      for (size_t k = 0; k < rows.size(); ++k) {
        for (int col = 0; col < kWidth; ++col) {
          const size_t i = rows[k] * kWidth + col;
          const double gi = g[k * kWidth + col];
          if (type == OptimizerSpec::ADAGRAD) {
            a[i] += gi * gi;
            p[i] -= 0.05 * gi / (std::sqrt(a[i]) + 1e-7);
          } else {
            m[i] = 0.9 * m[i] + 0.1 * gi;
            v[i] = 0.999 * v[i] + 0.001 * gi * gi;
            p[i] -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-7);
          }
        }
      }
    }
    ExpectClose(params, p);
    if (type == OptimizerSpec::ADAGRAD) {
      ExpectClose(slots[0], a);
    } else {
      ExpectClose(slots[0], m);
      ExpectClose(slots[1], v);
    }
    for (int col = 0; col < kWidth; ++col) {
      const int i = 2 * kWidth + col;
      EXPECT_EQ(params[i], params0[i]);
      for (const auto& sl : slots) EXPECT_EQ(sl[i], s0);
    }
  }
}

}  // namespace
}  // namespace shardps

namespace shardps {
namespace {

// The finiteness check computes the update on copies: it finds the first element that the
// apply would leave non-finite (the issue's -3e38 pushes: SGD and momentum rows overflow to
// inf, Adam's second moment overflows), changes nothing, and agrees with the apply itself.
TEST(OptimizerFiniteCheckTest, FindsTheFirstElementAnUpdateWouldOverflow) {
  for (OptimizerSpec::Type type : {OptimizerSpec::SGD, OptimizerSpec::MOMENTUM,
                                   OptimizerSpec::ADAGRAD, OptimizerSpec::ADAM,
                                   OptimizerSpec::FTRL}) {
    SCOPED_TRACE(OptimizerSpec::Type_Name(type));
    OptimizerSpec spec;
    spec.set_type(type);
    spec.set_learning_rate(type == OptimizerSpec::SGD ? 2.0 : 0.5);
    spec.set_momentum(0.9);
    std::unique_ptr<Optimizer> opt = Make(spec);
    constexpr int kLen = 600;  // over two tiles and a tail
    State s;
    // SGD's and momentum's parameters overflow when near the float range already; the
    // others' slots overflow from the gradient's square.
    const bool near_max = type == OptimizerSpec::SGD || type == OptimizerSpec::MOMENTUM;
    s.params.assign(kLen, near_max ? -3e38f : 0.5f);
    for (int k = 0; k < opt->num_slots(); ++k) {
      s.slots.emplace_back(kLen, opt->initial_slot_value(k));
    }
    std::vector<float*> slots;
    for (auto& v : s.slots) slots.push_back(v.data());
    std::vector<float> g(kLen, 1.0f);
    // A small gradient keeps everything finite.
    EXPECT_EQ(opt->FirstNonFiniteDense(1, 1.0, g, s.params.data(), slots), kLen);
    // Element 517's huge gradient overflows its parameter or a slot.
    g[517] = 3e38f;
    const State before = s;
    const int64_t bad = opt->FirstNonFiniteDense(1, 1.0, g, s.params.data(), slots);
    EXPECT_EQ(bad, 517);
    EXPECT_EQ(s.params, before.params);
    EXPECT_EQ(s.slots, before.slots);
    // The apply agrees: that element, and only it, comes out non-finite.
    opt->ApplyDense(1, g, s.params.data(), slots);
    bool any_bad = !std::isfinite(s.params[517]);
    for (auto& v : s.slots) any_bad = any_bad || !std::isfinite(v[517]);
    EXPECT_TRUE(any_bad);
    for (int i = 0; i < kLen; ++i) {
      if (i == 517) continue;
      ASSERT_TRUE(std::isfinite(s.params[i])) << i;
    }
  }
}

// 40 pushes of -3e38: without the check, SGD's row goes to inf after the second and Adam's
// v overflows on the first. The rows variant names the row and column.
TEST(OptimizerFiniteCheckTest, RowsNameTheRowAndColumn) {
  constexpr int kWidth = 4;
  for (OptimizerSpec::Type type : {OptimizerSpec::SGD, OptimizerSpec::ADAM}) {
    SCOPED_TRACE(OptimizerSpec::Type_Name(type));
    OptimizerSpec spec;
    spec.set_type(type);
    spec.set_learning_rate(1.0);
    std::unique_ptr<Optimizer> opt = Make(spec);
    std::vector<float> params(3 * kWidth, 0.0f), m(3 * kWidth, 0.0f), v = m;
    float* p_base = params.data();
    float* m_base = m.data();
    float* v_base = v.data();
    const RowBlocks p_rows = RowBlocks::Contiguous(&p_base, kWidth);
    const RowBlocks slot_rows[] = {RowBlocks::Contiguous(&m_base, kWidth),
                                   RowBlocks::Contiguous(&v_base, kWidth)};
    const absl::Span<const RowBlocks> slots(slot_rows, opt->num_slots());
    const std::vector<int64_t> rows = {2, 0};
    std::vector<float> grad(rows.size() * kWidth, 0.5f);
    grad[1 * kWidth + 3] = -3e38f;  // row 0, column 3
    int64_t first_refused = -1;
    for (int t = 1; t <= 40 && first_refused < 0; ++t) {
      const int64_t bad = opt->FirstNonFiniteRows(t, 1.0, rows, grad.data(), p_rows, slots);
      if (bad < static_cast<int64_t>(grad.size())) {
        EXPECT_EQ(bad, 1 * kWidth + 3);
        first_refused = t;
      } else {
        opt->ApplyRows(t, rows, grad.data(), p_rows, slots);
      }
    }
    ASSERT_GE(first_refused, 1) << "40 pushes of -3e38 were all accepted";
    for (float x : params) EXPECT_TRUE(std::isfinite(x));
    for (float x : m) EXPECT_TRUE(std::isfinite(x));
    for (float x : v) EXPECT_TRUE(std::isfinite(x));
  }
}


// RangesAfter holds every value the update makes, over many steps of gradients of every
// magnitude up to 1e6 (the ranges carried from step to step, as the ps carries them), and
// refuses to vouch (nullopt) for updates whose numbers could come near overflow: then the
// exact check decides. FTRL never vouches.
TEST(OptimizerRangesTest, RangesHoldEveryValueAndRefuseNearOverflow) {
  std::vector<OptimizerSpec> specs(6);
  specs[0].set_type(OptimizerSpec::SGD);
  specs[1].set_type(OptimizerSpec::MOMENTUM);
  specs[1].set_momentum(0.9);
  specs[2].set_type(OptimizerSpec::MOMENTUM);
  specs[2].set_momentum(0.9);
  specs[2].set_nesterov(true);
  specs[3].set_type(OptimizerSpec::ADAGRAD);
  specs[4].set_type(OptimizerSpec::ADAM);
  specs[5].set_type(OptimizerSpec::FTRL);
  for (OptimizerSpec& spec : specs) {
    spec.set_learning_rate(0.5);
    auto opt = Optimizer::Create(spec);
    ASSERT_TRUE(opt.ok()) << opt.status();
    State s = Init(**opt);
    Optimizer::Ranges ranges;
    auto take = [&](const State& st) {
      Optimizer::Ranges r;
      for (int k = 0; k <= (*opt)->num_slots(); ++k) {
        const std::vector<float>& v = k == 0 ? st.params : st.slots[k - 1];
        r.lo[k] = *std::min_element(v.begin(), v.end());
        r.hi[k] = *std::max_element(v.begin(), v.end());
      }
      return r;
    };
    ranges = take(s);
    for (int t = 1; t <= 60; ++t) {
      const float scale = std::pow(10.0f, static_cast<float>(t % 7));  // 1 .. 1e6
      std::vector<float> g(kN);
      double max_abs = 0;
      for (int i = 0; i < kN; ++i) {
        g[i] = Grad(t, i) * scale;
        max_abs = std::max(max_abs, std::fabs(static_cast<double>(g[i])));
      }
      std::optional<Optimizer::Ranges> after = (*opt)->RangesAfter(t, 1.0, max_abs, ranges);
      if (spec.type() == OptimizerSpec::FTRL) {
        EXPECT_FALSE(after.has_value());
        break;
      }
      ASSERT_TRUE(after.has_value()) << OptimizerSpec::Type_Name(spec.type()) << " step " << t;
      std::vector<float*> slots;
      for (auto& slot : s.slots) slots.push_back(slot.data());
      (*opt)->ApplyDense(t, g, s.params.data(), slots);
      const Optimizer::Ranges actual = take(s);
      for (int k = 0; k <= (*opt)->num_slots(); ++k) {
        EXPECT_LE(after->lo[k], actual.lo[k]) << OptimizerSpec::Type_Name(spec.type()) << k;
        EXPECT_GE(after->hi[k], actual.hi[k]) << OptimizerSpec::Type_Name(spec.type()) << k;
      }
      ranges = *after;
    }
    if (spec.type() == OptimizerSpec::FTRL) continue;
    // Near overflow: a gradient of 1e20 where the rule squares it, or parameters at 1e31.
    if (spec.type() == OptimizerSpec::ADAGRAD || spec.type() == OptimizerSpec::ADAM) {
      EXPECT_FALSE((*opt)->RangesAfter(1, 1.0, 1e20, take(Init(**opt))).has_value());
    }
    Optimizer::Ranges huge = take(Init(**opt));
    huge.hi[0] = 1e31;
    EXPECT_FALSE((*opt)->RangesAfter(1, 1.0, 1.0, huge).has_value());
    EXPECT_FALSE((*opt)->RangesAfter(1, 1.0, std::nan(""), take(Init(**opt))).has_value());
  }
}

}  // namespace
}  // namespace shardps
