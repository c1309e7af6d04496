#include "model/dense_layers_cpu.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "model/dense_layers_test_util.h"

namespace shardps {
namespace {

// act_l of one row, in double, from the definition.
std::vector<std::vector<double>> ReferenceForward(const DenseProblem& p, const float* x,
                                                  bool relu_last) {
  std::vector<std::vector<double>> acts;
  std::vector<double> in(x, x + p.dims[0]);
  const size_t num_layers = p.dims.size() - 1;
  for (size_t l = 0; l < num_layers; ++l) {
    const int k = p.dims[l], n = p.dims[l + 1];
    std::vector<double> out(n);
    for (int j = 0; j < n; ++j) {
      double z = p.values[2 * l + 1][j];
      for (int i = 0; i < k; ++i) z += in[i] * p.values[2 * l][i * n + j];
      out[j] = (relu_last || l + 1 < num_layers) ? std::max(z, 0.0) : z;
    }
    acts.push_back(out);
    in = out;
  }
  return acts;
}

TEST(ColumnSumsTest, AddsEveryRowOfEachColumnInOrder) {
  const int rows = 5, cols = 3;
  const std::vector<float> m = RandomFloats(rows * cols, 1);
  std::vector<float> out(cols, 99.0f);
  ColumnSums(m.data(), rows, cols, out.data());
  for (int c = 0; c < cols; ++c) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += m[r * cols + c];
    EXPECT_EQ(out[c], s) << c;  // bit for bit: the same order
  }
}

TEST(DenseForwardTest, MatchesTheDefinitionWithAndWithoutAReluOnTheLastLayer) {
  const DenseProblem p({6, 5, 4});
  const int rows = 3;
  const std::vector<float> x = RandomFloats(rows * 6, 2);
  for (bool relu_last : {false, true}) {
    std::vector<float> acts(rows * (5 + 4));
    DenseForward(x.data(), rows, p.dims, p.ParamPtrs().data(), relu_last, acts.data());
    for (int r = 0; r < rows; ++r) {
      const auto want = ReferenceForward(p, x.data() + r * 6, relu_last);
      for (int j = 0; j < 5; ++j) EXPECT_NEAR(acts[r * 5 + j], want[0][j], 1e-5);
      for (int j = 0; j < 4; ++j) EXPECT_NEAR(acts[rows * 5 + r * 4 + j], want[1][j], 1e-5);
    }
  }
}

// The loss sum(act_last * c) for fixed c: its gradient w.r.t. the last pre-activation is c.
double Loss(const DenseProblem& p, const std::vector<float>& x, int rows,
            const std::vector<float>& c) {
  const size_t width = p.dims.back();
  double loss = 0;
  for (int r = 0; r < rows; ++r) {
    const auto acts = ReferenceForward(p, x.data() + r * p.dims[0], false);
    for (size_t j = 0; j < width; ++j) loss += acts.back()[j] * c[r * width + j];
  }
  return loss;
}

TEST(DenseBackwardTest, GradientsMatchFiniteDifferences) {
  DenseProblem p({4, 6, 3});
  const int rows = 5;
  std::vector<float> x = RandomFloats(rows * 4, 3);
  const std::vector<float> c = RandomFloats(rows * 3, 4);
  std::vector<float> acts(rows * (6 + 3));
  DenseForward(x.data(), rows, p.dims, p.ParamPtrs().data(), false, acts.data());
  std::vector<float> dz0 = c, dz1(rows * 6);
  dz0.resize(rows * 6);
  float* const dz[2] = {dz0.data(), dz1.data()};
  std::vector<float> din(rows * 4, -7.0f);
  DenseBackward(x.data(), rows, p.dims, p.ParamPtrs().data(), acts.data(), dz,
                p.GradPtrs().data(), din.data());

  const double h = 1e-3;
  for (size_t k = 0; k < p.values.size(); ++k) {
    for (size_t i = 0; i < p.values[k].size(); ++i) {
      const float saved = p.values[k][i];
      p.values[k][i] = saved + h;
      const double up = Loss(p, x, rows, c);
      p.values[k][i] = saved - h;
      const double down = Loss(p, x, rows, c);
      p.values[k][i] = saved;
      EXPECT_NEAR(p.grads[k][i], (up - down) / (2 * h), 2e-3) << "param " << k << "[" << i << "]";
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = Loss(p, x, rows, c);
    x[i] = saved - h;
    const double down = Loss(p, x, rows, c);
    x[i] = saved;
    EXPECT_NEAR(din[i], (up - down) / (2 * h), 2e-3) << "input " << i;
  }
}

TEST(DenseBackwardTest, LeavesTheInputGradientAloneWithoutDin) {
  DenseProblem p({3, 2});
  const int rows = 2;
  const std::vector<float> x = RandomFloats(rows * 3, 5);
  std::vector<float> acts(rows * 2);
  DenseForward(x.data(), rows, p.dims, p.ParamPtrs().data(), false, acts.data());
  std::vector<float> dz0 = RandomFloats(rows * 3, 6), dz1(rows * 3, 42.0f);
  float* const dz[2] = {dz0.data(), dz1.data()};
  DenseBackward(x.data(), rows, p.dims, p.ParamPtrs().data(), acts.data(), dz,
                p.GradPtrs().data(), nullptr);
  for (float v : dz1) EXPECT_EQ(v, 42.0f);  // one layer: the scratch is never written
  for (float g : p.grads[0]) EXPECT_NE(g, -7.0f);
}

}  // namespace
}  // namespace shardps
