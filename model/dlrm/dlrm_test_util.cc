#include "model/dlrm/dlrm_test_util.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace shardps {

DlrmBatch DlrmProblem::View() const {
  DlrmBatch b;
  b.batch = batch;
  b.dense = dense;
  b.labels = labels;
  for (size_t t = 0; t < spec.tables.size(); ++t) {
    DlrmTableBatch tb;
    tb.rows = rows[t];
    tb.num_rows = static_cast<int64_t>(rows[t].size()) / spec.tables[t].dim;
    tb.offsets = offsets[t];
    tb.positions = positions[t];
    b.tables.push_back(tb);
  }
  return b;
}

std::vector<absl::Span<const float>> DlrmProblem::ParamSpans() const {
  std::vector<absl::Span<const float>> v;
  for (const auto& p : params) v.emplace_back(p);
  return v;
}

DlrmProblem MakeDlrmProblem(const DlrmSpec& spec, int batch, int rows_per_table,
                            int max_hotness, uint32_t seed) {
  DlrmProblem p;
  p.spec = spec;
  p.batch = batch;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (const DlrmParamInfo& info : DlrmDenseParams(spec)) {
    std::vector<float> v(info.num_elements());
    const float scale = info.shape.size() == 2
                            ? std::sqrt(6.0f / static_cast<float>(info.shape[0] + info.shape[1]))
                            : 0.1f;
    for (float& x : v) x = uniform(gen) * scale;
    p.params.push_back(std::move(v));
  }
  p.dense.resize(static_cast<size_t>(batch) * spec.num_dense);
  for (float& x : p.dense) x = uniform(gen);
  std::bernoulli_distribution coin(0.4);
  for (int i = 0; i < batch; ++i) p.labels.push_back(coin(gen) ? 1.0f : 0.0f);
  std::uniform_int_distribution<int> hot(0, max_hotness);
  std::uniform_int_distribution<int> row(0, rows_per_table - 1);
  for (const DlrmTableSpec& t : spec.tables) {
    std::vector<float> r(static_cast<size_t>(rows_per_table) * t.dim);
    for (float& x : r) x = uniform(gen) * 0.5f;
    p.rows.push_back(std::move(r));
    std::vector<int32_t> off = {0}, pos;
    for (int i = 0; i < batch; ++i) {
      const int h = hot(gen);
      for (int k = 0; k < h; ++k) {
        // Now and then the same row twice in one example.
        pos.push_back(k > 0 && k % 3 == 2 ? pos.back() : row(gen));
      }
      off.push_back(static_cast<int32_t>(pos.size()));
    }
    p.offsets.push_back(std::move(off));
    p.positions.push_back(std::move(pos));
  }
  return p;
}

std::vector<std::vector<double>> ToDouble(const std::vector<std::vector<float>>& v) {
  std::vector<std::vector<double>> out;
  for (const auto& x : v) out.emplace_back(x.begin(), x.end());
  return out;
}

namespace {

// y = act(x W + b) for one example through the layers of widths `widths` starting at params
// index `first`.
std::vector<double> Mlp(std::vector<double> x, const std::vector<int>& widths,
                        const std::vector<std::vector<double>>& params, size_t first,
                        bool relu_last) {
  for (size_t l = 0; l < widths.size(); ++l) {
    const std::vector<double>& w = params[first + 2 * l];
    const std::vector<double>& b = params[first + 2 * l + 1];
    const int out = widths[l];
    std::vector<double> y(out);
    for (int j = 0; j < out; ++j) {
      double s = b[j];
      for (size_t i = 0; i < x.size(); ++i) s += x[i] * w[i * out + j];
      y[j] = (relu_last || l + 1 < widths.size()) ? std::max(s, 0.0) : s;
    }
    x = std::move(y);
  }
  return x;
}

}  // namespace

double ReferenceMeanLoss(const DlrmProblem& problem,
                         const std::vector<std::vector<double>>& params,
                         const std::vector<std::vector<double>>& rows,
                         std::vector<double>* logits) {
  const DlrmSpec& spec = problem.spec;
  if (logits != nullptr) logits->assign(problem.batch, 0.0);
  double loss = 0;
  for (int i = 0; i < problem.batch; ++i) {
    std::vector<std::vector<double>> vectors;
    std::vector<double> bottom;
    if (spec.num_dense > 0) {
      std::vector<double> x(problem.dense.begin() + static_cast<size_t>(i) * spec.num_dense,
                            problem.dense.begin() + static_cast<size_t>(i + 1) * spec.num_dense);
      bottom = Mlp(x, spec.bottom, params, 0, true);
      vectors.push_back(bottom);
    }
    for (size_t t = 0; t < spec.tables.size(); ++t) {
      const int dim = spec.tables[t].dim;
      std::vector<double> pooled(dim, 0.0);
      const int lo = problem.offsets[t][i], hi = problem.offsets[t][i + 1];
      for (int k = lo; k < hi; ++k) {
        const int r = problem.positions[t][k];
        for (int c = 0; c < dim; ++c) pooled[c] += rows[t][static_cast<size_t>(r) * dim + c];
      }
      if (spec.tables[t].pooling == DlrmPooling::kMean && hi > lo) {
        for (double& v : pooled) v /= (hi - lo);
      }
      vectors.push_back(pooled);
    }
    std::vector<double> features;
    if (spec.interaction == DlrmInteraction::kConcat) {
      for (const auto& v : vectors) features.insert(features.end(), v.begin(), v.end());
    } else {
      features = bottom;
      for (size_t a = 0; a < vectors.size(); ++a) {
        for (size_t b = a + 1; b < vectors.size(); ++b) {
          double s = 0;
          for (size_t c = 0; c < vectors[a].size(); ++c) s += vectors[a][c] * vectors[b][c];
          features.push_back(s);
        }
      }
    }
    std::vector<int> top = spec.top;
    top.push_back(1);
    const double z = Mlp(features, top, params, 2 * spec.bottom.size(), false)[0];
    const double y = problem.labels[i];
    // -y log s(z) - (1 - y) log(1 - s(z)), written out.
    const double s = 1.0 / (1.0 + std::exp(-z));
    loss += -y * std::log(s) - (1 - y) * std::log(1 - s);
    if (logits != nullptr) (*logits)[i] = z;
  }
  return loss / problem.batch;
}

}  // namespace shardps
