#include "model/dense_layers_cpu.h"

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(gen);
  return v;
}

// A stack of layers with random parameters: params[2l] is dims[l] x dims[l+1], params[2l+1]
// dims[l+1].
struct Layers {
  explicit Layers(std::vector<int> d) : dims(std::move(d)) {
    for (size_t l = 0; l + 1 < dims.size(); ++l) {
      values.push_back(Random(static_cast<size_t>(dims[l]) * dims[l + 1], 10 + l));
      values.push_back(Random(dims[l + 1], 20 + l));
    }
    for (const std::vector<float>& v : values) {
      params.push_back(v.data());
      grads.emplace_back(v.size(), -7.0f);
    }
  }
  std::vector<float*> GradPointers() {
    std::vector<float*> out;
    for (std::vector<float>& g : grads) out.push_back(g.data());
    return out;
  }
  std::vector<int> dims;
  std::vector<std::vector<float>> values;
  std::vector<const float*> params;
  std::vector<std::vector<float>> grads;
};

// act_l of one row, in double, from the definition.
std::vector<std::vector<double>> ReferenceForward(const Layers& layers, const float* x,
                                                  bool relu_last) {
  std::vector<std::vector<double>> acts;
  std::vector<double> in(x, x + layers.dims[0]);
  const size_t num_layers = layers.dims.size() - 1;
  for (size_t l = 0; l < num_layers; ++l) {
    const int k = layers.dims[l], n = layers.dims[l + 1];
    std::vector<double> out(n);
    for (int j = 0; j < n; ++j) {
      double z = layers.params[2 * l + 1][j];
      for (int i = 0; i < k; ++i) z += in[i] * layers.params[2 * l][i * n + j];
      out[j] = (relu_last || l + 1 < num_layers) ? std::max(z, 0.0) : z;
    }
    acts.push_back(out);
    in = out;
  }
  return acts;
}

TEST(ColumnSumsTest, AddsEveryRowOfEachColumnInOrder) {
  const int rows = 5, cols = 3;
  const std::vector<float> m = Random(rows * cols, 1);
  std::vector<float> out(cols, 99.0f);
  ColumnSums(m.data(), rows, cols, out.data());
  for (int c = 0; c < cols; ++c) {
    float s = 0.0f;
    for (int r = 0; r < rows; ++r) s += m[r * cols + c];
    EXPECT_EQ(out[c], s) << c;  // bit for bit: the same order
  }
}

TEST(DenseForwardTest, MatchesTheDefinitionWithAndWithoutAReluOnTheLastLayer) {
  Layers layers({6, 5, 4});
  const int rows = 3;
  const std::vector<float> x = Random(rows * 6, 2);
  for (bool relu_last : {false, true}) {
    std::vector<float> acts(rows * (5 + 4));
    DenseForward(x.data(), rows, layers.dims, layers.params.data(), relu_last, acts.data());
    for (int r = 0; r < rows; ++r) {
      const auto want = ReferenceForward(layers, x.data() + r * 6, relu_last);
      for (int j = 0; j < 5; ++j) EXPECT_NEAR(acts[r * 5 + j], want[0][j], 1e-5);
      for (int j = 0; j < 4; ++j) EXPECT_NEAR(acts[rows * 5 + r * 4 + j], want[1][j], 1e-5);
    }
  }
}

// The loss sum(act_last * c) for fixed c: its gradient w.r.t. the last pre-activation is c.
double Loss(const Layers& layers, const std::vector<float>& x, int rows,
            const std::vector<float>& c) {
  double loss = 0;
  for (int r = 0; r < rows; ++r) {
    const auto acts = ReferenceForward(layers, x.data() + r * layers.dims[0], false);
    for (size_t j = 0; j < acts.back().size(); ++j) loss += acts.back()[j] * c[r * acts.back().size() + j];
  }
  return loss;
}

TEST(DenseBackwardTest, GradientsMatchFiniteDifferences) {
  Layers layers({4, 6, 3});
  const int rows = 5;
  std::vector<float> x = Random(rows * 4, 3);
  const std::vector<float> c = Random(rows * 3, 4);
  std::vector<float> acts(rows * (6 + 3));
  DenseForward(x.data(), rows, layers.dims, layers.params.data(), false, acts.data());
  std::vector<float> dz0 = c, dz1(rows * 6);
  dz0.resize(rows * 6);
  float* const dz[2] = {dz0.data(), dz1.data()};
  std::vector<float> din(rows * 4, -7.0f);
  const std::vector<float*> grads = layers.GradPointers();
  DenseBackward(x.data(), rows, layers.dims, layers.params.data(), acts.data(), dz,
                grads.data(), din.data());

  const double h = 1e-3;
  for (size_t p = 0; p < layers.values.size(); ++p) {
    for (size_t i = 0; i < layers.values[p].size(); ++i) {
      const float saved = layers.values[p][i];
      layers.values[p][i] = saved + h;
      const double up = Loss(layers, x, rows, c);
      layers.values[p][i] = saved - h;
      const double down = Loss(layers, x, rows, c);
      layers.values[p][i] = saved;
      EXPECT_NEAR(layers.grads[p][i], (up - down) / (2 * h), 2e-3) << "param " << p << "[" << i << "]";
    }
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + h;
    const double up = Loss(layers, x, rows, c);
    x[i] = saved - h;
    const double down = Loss(layers, x, rows, c);
    x[i] = saved;
    EXPECT_NEAR(din[i], (up - down) / (2 * h), 2e-3) << "input " << i;
  }
}

TEST(DenseBackwardTest, LeavesTheInputGradientAloneWithoutDin) {
  Layers layers({3, 2});
  const int rows = 2;
  const std::vector<float> x = Random(rows * 3, 5);
  std::vector<float> acts(rows * 2);
  DenseForward(x.data(), rows, layers.dims, layers.params.data(), false, acts.data());
  std::vector<float> dz0 = Random(rows * 3, 6), dz1(rows * 3, 42.0f);
  float* const dz[2] = {dz0.data(), dz1.data()};
  const std::vector<float*> grads = layers.GradPointers();
  DenseBackward(x.data(), rows, layers.dims, layers.params.data(), acts.data(), dz, grads.data(),
                nullptr);
  for (float v : dz1) EXPECT_EQ(v, 42.0f);  // one layer: the scratch is never written
  for (float g : layers.grads[0]) EXPECT_NE(g, -7.0f);
}

}  // namespace
}  // namespace shardps
