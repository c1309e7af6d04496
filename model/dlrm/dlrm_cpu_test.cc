#include "model/dlrm/dlrm_cpu.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dlrm/dlrm_test_util.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

// A small model: 3 dense features, 3 tables of dim 3 (the last mean-pooled unless all are).
DlrmSpec SmallSpec(DlrmInteraction interaction, DlrmPooling pooling) {
  DlrmSpec spec;
  spec.num_dense = 3;
  spec.bottom = {5, 3};
  spec.top = {6, 4};
  spec.interaction = interaction;
  for (const char* name : {"a", "b", "c"}) {
    DlrmTableSpec t;
    t.name = name;
    t.vocab_size = 100;
    t.dim = 3;
    t.pooling = pooling;
    spec.tables.push_back(t);
  }
  if (pooling == DlrmPooling::kSum) spec.tables[2].pooling = DlrmPooling::kMean;
  return spec;
}

DlrmStepOutput Step(DlrmCompute* compute, const DlrmProblem& p) {
  DlrmStepOutput out;
  const auto params = p.ParamSpans();
  const absl::Status s = compute->ForwardBackward(p.spec, params, p.View(), &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// |a - b| within abs + rel * |b|.
void ExpectNear(double a, double b, double abs_tol, double rel_tol, const std::string& what) {
  EXPECT_LE(std::abs(a - b), abs_tol + rel_tol * std::abs(b)) << what << ": " << a << " vs " << b;
}

class DlrmGradientTest
    : public ::testing::TestWithParam<std::tuple<DlrmInteraction, DlrmPooling, int>> {};

// Every dense and row gradient against central differences of the double reference, and the
// loss and logits against the reference itself.
TEST_P(DlrmGradientTest, MatchesFiniteDifferences) {
  const auto [interaction, pooling, threads] = GetParam();
  const DlrmProblem p = MakeDlrmProblem(SmallSpec(interaction, pooling), /*batch=*/70,
                                        /*rows_per_table=*/6, /*max_hotness=*/4, /*seed=*/7);
  // Some examples have no ids in some table, and some repeat an id.
  int empty = 0;
  for (int i = 0; i < p.batch; ++i) empty += p.offsets[0][i] == p.offsets[0][i + 1];
  ASSERT_GT(empty, 0);

  auto compute = NewDlrmCpuCompute(threads);
  const DlrmStepOutput out = Step(compute.get(), p);
  std::vector<std::vector<double>> params = ToDouble(p.params);
  std::vector<std::vector<double>> rows = ToDouble(p.rows);
  std::vector<double> logits;
  const double loss = ReferenceMeanLoss(p, params, rows, &logits);
  ExpectNear(out.loss, loss, 1e-6, 1e-5, "loss");
  ASSERT_EQ(out.logits.size(), static_cast<size_t>(p.batch));
  for (int i = 0; i < p.batch; ++i) ExpectNear(out.logits[i], logits[i], 1e-5, 1e-5, "logit");

  constexpr double kEps = 1e-6;
  auto check = [&](std::vector<std::vector<double>>* vars, const std::vector<std::vector<float>>& grads,
                   const std::string& kind) {
    ASSERT_EQ(grads.size(), vars->size()) << kind;
    for (size_t v = 0; v < vars->size(); ++v) {
      ASSERT_EQ(grads[v].size(), (*vars)[v].size()) << kind << " " << v;
      for (size_t k = 0; k < (*vars)[v].size(); ++k) {
        double& x = (*vars)[v][k];
        const double saved = x;
        x = saved + kEps;
        const double up = ReferenceMeanLoss(p, params, rows);
        x = saved - kEps;
        const double down = ReferenceMeanLoss(p, params, rows);
        x = saved;
        ExpectNear(grads[v][k], (up - down) / (2 * kEps), 2e-5, 1e-3,
                   kind + " " + std::to_string(v) + "[" + std::to_string(k) + "]");
      }
    }
  };
  check(&params, out.dense_grads, "dense param");
  check(&rows, out.row_grads, "table rows");
}

INSTANTIATE_TEST_SUITE_P(
    All, DlrmGradientTest,
    ::testing::Combine(::testing::Values(DlrmInteraction::kConcat, DlrmInteraction::kDot),
                       ::testing::Values(DlrmPooling::kSum, DlrmPooling::kMean),
                       ::testing::Values(1, 3)));

// Gradients with no bottom MLP (dense features straight into the interaction), and with no
// dense features at all.
TEST(DlrmCpuTest, NoBottomAndNoDenseMatchFiniteDifferences) {
  for (int num_dense : {0, 3}) {
    DlrmSpec spec = SmallSpec(DlrmInteraction::kDot, DlrmPooling::kSum);
    spec.num_dense = num_dense;
    spec.bottom.clear();
    spec.top = {4};
    ASSERT_TRUE(ValidateDlrmSpec(spec).ok()) << ValidateDlrmSpec(spec);
    const DlrmProblem p = MakeDlrmProblem(spec, 9, 5, 3, 11);
    auto compute = NewDlrmCpuCompute(2);
    const DlrmStepOutput out = Step(compute.get(), p);
    auto params = ToDouble(p.params);
    auto rows = ToDouble(p.rows);
    ExpectNear(out.loss, ReferenceMeanLoss(p, params, rows), 1e-6, 1e-5, "loss");
    for (size_t t = 0; t < rows.size(); ++t) {
      for (size_t k = 0; k < rows[t].size(); ++k) {
        const double saved = rows[t][k];
        rows[t][k] = saved + 1e-6;
        const double up = ReferenceMeanLoss(p, params, rows);
        rows[t][k] = saved - 1e-6;
        const double down = ReferenceMeanLoss(p, params, rows);
        rows[t][k] = saved;
        ExpectNear(out.row_grads[t][k], (up - down) / 2e-6, 2e-5, 1e-3, "row grad");
      }
    }
  }
}

// One dense feature straight into a logistic regression with one table of dim 1:
// z = w0 x + w1 e + b, worked out by hand.
TEST(DlrmCpuTest, LossMatchesHandComputation) {
  DlrmSpec spec;
  spec.num_dense = 1;
  spec.tables.push_back({"t", 10, 1, DlrmPooling::kSum});
  ASSERT_TRUE(ValidateDlrmSpec(spec).ok());
  const std::vector<float> kernel = {0.25f, 2.0f}, bias = {0.1f};
  const std::vector<float> dense = {2.0f, -4.0f};
  const std::vector<float> labels = {1.0f, 0.0f};
  const std::vector<float> rows = {0.5f, -1.0f};
  const std::vector<int32_t> offsets = {0, 2, 2};  // example 1 has no ids
  const std::vector<int32_t> positions = {0, 1};
  DlrmBatch batch;
  batch.batch = 2;
  batch.dense = dense;
  batch.labels = labels;
  batch.tables.push_back({rows, 2, offsets, positions});
  const std::vector<absl::Span<const float>> params = {kernel, bias};

  // Example 0: e = 0.5 - 1 = -0.5, z = 0.5 - 1 + 0.1 = -0.4, label 1: log(1 + e^0.4).
  // Example 1: e = 0, z = -1 + 0.1 = -0.9, label 0: log(1 + e^-0.9).
  const double z0 = -0.4, z1 = -0.9;
  const double expected = (std::log(1 + std::exp(0.4)) + std::log(1 + std::exp(-0.9))) / 2;
  auto compute = NewDlrmCpuCompute(1);
  DlrmStepOutput out;
  ASSERT_TRUE(compute->ForwardBackward(spec, params, batch, &out).ok());
  EXPECT_NEAR(out.loss, expected, 1e-6);
  EXPECT_NEAR(out.logits[0], z0, 1e-6);
  EXPECT_NEAR(out.logits[1], z1, 1e-6);
  // dL/dz = (s(z) - y) / 2; only example 0 touches the rows, each with weight w1 = 2.
  const double g0 = (1 / (1 + std::exp(-z0)) - 1) / 2, g1 = 1 / (1 + std::exp(-z1)) / 2;
  ASSERT_EQ(out.row_grads.size(), 1u);
  EXPECT_NEAR(out.row_grads[0][0], g0 * 2, 1e-6);
  EXPECT_NEAR(out.row_grads[0][1], g0 * 2, 1e-6);
  EXPECT_NEAR(out.dense_grads[0][0], g0 * 2 + g1 * -4, 1e-6);  // d/dw0 = sum g x
  EXPECT_NEAR(out.dense_grads[0][1], g0 * -0.5, 1e-6);         // d/dw1 = sum g e
  EXPECT_NEAR(out.dense_grads[1][0], g0 + g1, 1e-6);

  DlrmEvalOutput eval;
  ASSERT_TRUE(compute->Evaluate(spec, params, batch, &eval).ok());
  EXPECT_NEAR(eval.loss_sum, 2 * expected, 1e-6);
  EXPECT_EQ(eval.num_examples, 2);
  ASSERT_EQ(eval.probabilities.size(), 2u);
  EXPECT_NEAR(eval.probabilities[0], 1 / (1 + std::exp(-z0)), 1e-6);
  EXPECT_NEAR(eval.probabilities[1], 1 / (1 + std::exp(-z1)), 1e-6);
}

// A logit far from zero: the loss stays finite and exact (no log(0)).
TEST(DlrmCpuTest, LossIsStableForLargeLogits) {
  DlrmSpec spec;
  spec.num_dense = 1;
  const std::vector<float> kernel = {1.0f}, bias = {0.0f};
  const std::vector<float> dense = {200.0f, -200.0f}, labels = {0.0f, 1.0f};
  DlrmBatch batch;
  batch.batch = 2;
  batch.dense = dense;
  batch.labels = labels;
  DlrmStepOutput out;
  ASSERT_TRUE(NewDlrmCpuCompute(1)->ForwardBackward(spec, {kernel, bias}, batch, &out).ok());
  EXPECT_NEAR(out.loss, 200.0, 1e-3);
  EXPECT_NEAR(out.dense_grads[0][0], (200.0 * 1 + -200.0 * -1) / 2, 1e-3);
}

// The same id twice in one example counts twice: the same as two rows with equal values, and
// the row's gradient is the sum of theirs.
TEST(DlrmCpuTest, DuplicateIdsInOneExampleCountTwice) {
  for (DlrmPooling pooling : {DlrmPooling::kSum, DlrmPooling::kMean}) {
    DlrmSpec spec = SmallSpec(DlrmInteraction::kConcat, pooling);
    spec.tables.resize(1);
    spec.tables[0].pooling = pooling;
    DlrmProblem dup = MakeDlrmProblem(spec, 1, 2, 0, 3);
    dup.rows[0] = {0.1f, -0.2f, 0.3f, 0.4f, 0.5f, -0.6f};
    dup.offsets[0] = {0, 3};
    dup.positions[0] = {0, 1, 0};
    DlrmProblem split = dup;
    split.rows[0].insert(split.rows[0].end(), {0.1f, -0.2f, 0.3f});  // row 2 = row 0
    split.positions[0] = {0, 1, 2};
    auto compute = NewDlrmCpuCompute(1);
    const DlrmStepOutput a = Step(compute.get(), dup);
    const DlrmStepOutput b = Step(compute.get(), split);
    EXPECT_FLOAT_EQ(a.logits[0], b.logits[0]);
    EXPECT_FLOAT_EQ(a.loss, b.loss);
    for (int c = 0; c < 3; ++c) {
      EXPECT_FLOAT_EQ(a.row_grads[0][c], b.row_grads[0][c] + b.row_grads[0][6 + c]);
      EXPECT_FLOAT_EQ(a.row_grads[0][3 + c], b.row_grads[0][3 + c]);
      EXPECT_FLOAT_EQ(b.row_grads[0][c], b.row_grads[0][6 + c]);
    }
  }
}

TEST(DlrmCpuTest, BitReproducible) {
  const DlrmProblem p = MakeDlrmProblem(SmallSpec(DlrmInteraction::kDot, DlrmPooling::kSum),
                                        300, 40, 5, 5);
  auto c1 = NewDlrmCpuCompute(3);
  auto c2 = NewDlrmCpuCompute(3);
  const DlrmStepOutput a = Step(c1.get(), p);
  const DlrmStepOutput b = Step(c1.get(), p);  // same instance, buffers reused
  const DlrmStepOutput c = Step(c2.get(), p);  // another instance
  for (const DlrmStepOutput* o : {&b, &c}) {
    EXPECT_EQ(a.loss, o->loss);
    EXPECT_EQ(a.logits, o->logits);
    EXPECT_EQ(a.dense_grads, o->dense_grads);
    EXPECT_EQ(a.row_grads, o->row_grads);
  }
  // Another thread count slices the batch differently: equal up to float rounding.
  const DlrmStepOutput one = Step(NewDlrmCpuCompute(1).get(), p);
  ASSERT_EQ(one.row_grads.size(), a.row_grads.size());
  for (size_t t = 0; t < a.row_grads.size(); ++t) {
    for (size_t k = 0; k < a.row_grads[t].size(); ++k) {
      EXPECT_NEAR(one.row_grads[t][k], a.row_grads[t][k], 1e-6);
    }
  }
}

TEST(DlrmCpuTest, RejectsBadShapesNamingThem) {
  const DlrmProblem p = MakeDlrmProblem(SmallSpec(DlrmInteraction::kConcat, DlrmPooling::kSum),
                                        4, 5, 2, 9);
  auto compute = NewDlrmCpuCompute(1);
  DlrmStepOutput out;
  auto run = [&](const DlrmSpec& spec, std::vector<absl::Span<const float>> params,
                 const DlrmBatch& batch) {
    return compute->ForwardBackward(spec, params, batch, &out);
  };
  auto expect = [](const absl::Status& s, const std::string& text) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(text));
  };
  {
    auto params = p.ParamSpans();
    params[4] = params[4].subspan(1);  // top_0/kernel
    expect(run(p.spec, params, p.View()), "top_0/kernel");
    params.pop_back();
    expect(run(p.spec, params, p.View()), "dense parameters given");
  }
  {
    DlrmBatch b = p.View();
    b.tables[1].rows = b.tables[1].rows.subspan(1);
    expect(run(p.spec, p.ParamSpans(), b), "table \"b\" rows");
  }
  {
    DlrmBatch b = p.View();
    std::vector<int32_t> pos(p.positions[2]);
    ASSERT_FALSE(pos.empty());
    pos.back() = 5;  // num_rows is 5
    b.tables[2].positions = pos;
    expect(run(p.spec, p.ParamSpans(), b), "table \"c\" positions");
  }
  {
    DlrmBatch b = p.View();
    b.tables[0].offsets = b.tables[0].offsets.subspan(1);
    expect(run(p.spec, p.ParamSpans(), b), "table \"a\" offsets");
  }
  {
    DlrmBatch b = p.View();
    b.tables.pop_back();
    expect(run(p.spec, p.ParamSpans(), b), "2 tables, the spec has 3");
  }
  {
    DlrmBatch b = p.View();
    std::vector<float> labels(p.labels);
    labels[3] = 2.0f;
    b.labels = labels;
    expect(run(p.spec, p.ParamSpans(), b), "example 3");
  }
  {
    DlrmBatch b = p.View();
    b.dense = b.dense.subspan(1);
    expect(run(p.spec, p.ParamSpans(), b), "dense has");
  }
  {
    DlrmSpec spec = p.spec;
    spec.interaction = DlrmInteraction::kDot;
    spec.tables[1].dim = 4;
    expect(run(spec, p.ParamSpans(), p.View()), "table \"b\" has dim 4");
  }
  EXPECT_TRUE(out.logits.empty());  // nothing written on error
}

// Plain SGD on a planted problem: two tables whose ids carry a hidden score, two dense
// features with hidden weights; labels drawn from the sigmoid of the sum. The loss on the
// training set falls well below its starting value.
TEST(DlrmCpuTest, SgdOnPlantedProblemReducesLoss) {
  constexpr int kExamples = 2048, kBatch = 128, kVocab = 40, kEpochs = 25;
  DlrmSpec spec;
  spec.num_dense = 2;
  spec.bottom = {8, 4};
  spec.top = {8};
  spec.interaction = DlrmInteraction::kDot;
  spec.tables = {{"u", kVocab, 4, DlrmPooling::kSum}, {"v", kVocab, 4, DlrmPooling::kMean}};
  ASSERT_TRUE(ValidateDlrmSpec(spec).ok());

  std::mt19937 gen(42);
  std::normal_distribution<float> normal;
  std::uniform_int_distribution<int> id(0, kVocab - 1);
  std::vector<float> score_u(kVocab), score_v(kVocab);
  for (float& s : score_u) s = 2 * normal(gen);
  for (float& s : score_v) s = 2 * normal(gen);
  std::vector<float> dense(2 * kExamples), labels(kExamples);
  std::vector<int64_t> ids_u(kExamples);
  std::vector<std::vector<int64_t>> ids_v(kExamples);
  for (int i = 0; i < kExamples; ++i) {
    dense[2 * i] = normal(gen);
    dense[2 * i + 1] = normal(gen);
    ids_u[i] = id(gen);
    float v = 0;
    for (int k = 0; k < 1 + i % 3; ++k) {
      ids_v[i].push_back(id(gen));
      v += score_v[ids_v[i].back()];
    }
    const float z = score_u[ids_u[i]] + v / ids_v[i].size() + 1.5f * dense[2 * i] -
                    dense[2 * i + 1];
    labels[i] = std::bernoulli_distribution(1 / (1 + std::exp(-z)))(gen) ? 1.0f : 0.0f;
  }

  DlrmProblem init = MakeDlrmProblem(spec, 1, 1, 0, 1);  // just for initial dense params
  std::vector<std::vector<float>> params = init.params;
  std::vector<std::vector<float>> tables(2, std::vector<float>(kVocab * 4));
  std::uniform_real_distribution<float> small(-0.1f, 0.1f);
  for (auto& t : tables) {
    for (float& x : t) x = small(gen);
  }

  auto compute = NewDlrmCpuCompute(2);
  auto full_loss = [&]() {
    double loss = 0;
    for (int b0 = 0; b0 < kExamples; b0 += kBatch) {
      // Forward over the whole tables (positions are the ids themselves).
      std::vector<int32_t> off_u = {0}, pos_u, off_v = {0}, pos_v;
      for (int i = b0; i < b0 + kBatch; ++i) {
        pos_u.push_back(static_cast<int32_t>(ids_u[i]));
        off_u.push_back(static_cast<int32_t>(pos_u.size()));
        for (int64_t v : ids_v[i]) pos_v.push_back(static_cast<int32_t>(v));
        off_v.push_back(static_cast<int32_t>(pos_v.size()));
      }
      DlrmBatch batch;
      batch.batch = kBatch;
      batch.dense = absl::MakeConstSpan(dense).subspan(2 * b0, 2 * kBatch);
      batch.labels = absl::MakeConstSpan(labels).subspan(b0, kBatch);
      batch.tables = {{tables[0], kVocab, off_u, pos_u}, {tables[1], kVocab, off_v, pos_v}};
      std::vector<absl::Span<const float>> spans(params.begin(), params.end());
      DlrmEvalOutput eval;
      EXPECT_TRUE(compute->Evaluate(spec, spans, batch, &eval).ok());
      loss += eval.loss_sum;
    }
    return loss / kExamples;
  };

  const double before = full_loss();
  constexpr float kLr = 0.5f;
  DedupedIds dedup[2];
  DlrmStepOutput out;
  for (int epoch = 0; epoch < kEpochs; ++epoch) {
    for (int b0 = 0; b0 < kExamples; b0 += kBatch) {
      // As the worker does: dedup each table's ids, "pull" the unique rows, compute, and
      // apply the row gradients to those rows.
      std::vector<int32_t> off_u = {0}, off_v = {0};
      std::vector<int64_t> raw_u, raw_v;
      for (int i = b0; i < b0 + kBatch; ++i) {
        raw_u.push_back(ids_u[i]);
        off_u.push_back(static_cast<int32_t>(raw_u.size()));
        raw_v.insert(raw_v.end(), ids_v[i].begin(), ids_v[i].end());
        off_v.push_back(static_cast<int32_t>(raw_v.size()));
      }
      ASSERT_TRUE(DedupIds(off_u, raw_u, &dedup[0]).ok());
      ASSERT_TRUE(DedupIds(off_v, raw_v, &dedup[1]).ok());
      std::vector<float> pulled[2];
      for (int t = 0; t < 2; ++t) {
        for (int64_t u : dedup[t].unique_ids) {
          pulled[t].insert(pulled[t].end(), tables[t].begin() + u * 4,
                           tables[t].begin() + u * 4 + 4);
        }
      }
      DlrmBatch batch;
      batch.batch = kBatch;
      batch.dense = absl::MakeConstSpan(dense).subspan(2 * b0, 2 * kBatch);
      batch.labels = absl::MakeConstSpan(labels).subspan(b0, kBatch);
      batch.tables = {TableBatchView(dedup[0], pulled[0]), TableBatchView(dedup[1], pulled[1])};
      std::vector<absl::Span<const float>> spans(params.begin(), params.end());
      ASSERT_TRUE(compute->ForwardBackward(spec, spans, batch, &out).ok());
      for (size_t i = 0; i < params.size(); ++i) {
        for (size_t k = 0; k < params[i].size(); ++k) params[i][k] -= kLr * out.dense_grads[i][k];
      }
      for (int t = 0; t < 2; ++t) {
        for (size_t r = 0; r < dedup[t].unique_ids.size(); ++r) {
          for (int c = 0; c < 4; ++c) {
            tables[t][dedup[t].unique_ids[r] * 4 + c] -= kLr * out.row_grads[t][r * 4 + c];
          }
        }
      }
    }
  }
  const double after = full_loss();
  EXPECT_LT(after, 0.6 * before) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace shardps
