#include "model/dense_layers_test_util.h"

#include <random>
#include <utility>

namespace shardps {

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = uniform(gen);
  return v;
}

DenseProblem::DenseProblem(std::vector<int> d) : dims(std::move(d)) {
  for (size_t l = 0; l + 1 < dims.size(); ++l) {
    values.push_back(RandomFloats(static_cast<size_t>(dims[l]) * dims[l + 1], 10 + 2 * l));
    values.push_back(RandomFloats(dims[l + 1], 11 + 2 * l));
  }
  for (const std::vector<float>& v : values) grads.emplace_back(v.size(), -7.0f);
}

std::vector<const float*> DenseProblem::ParamPtrs() const {
  std::vector<const float*> out;
  for (const std::vector<float>& v : values) out.push_back(v.data());
  return out;
}

std::vector<float*> DenseProblem::GradPtrs() {
  std::vector<float*> out;
  for (std::vector<float>& g : grads) out.push_back(g.data());
  return out;
}

std::vector<float> DenseProblem::Packed() const {
  std::vector<float> out;
  for (const std::vector<float>& v : values) out.insert(out.end(), v.begin(), v.end());
  return out;
}

std::vector<size_t> DenseProblem::Offsets() const {
  std::vector<size_t> out = {0};
  for (const std::vector<float>& v : values) out.push_back(out.back() + v.size());
  return out;
}

}  // namespace shardps
