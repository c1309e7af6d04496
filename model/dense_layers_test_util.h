// Test helpers for the dense layers (dense_layers_cpu.h, dense_layers_cuda.h): random values,
// and a stack of layers with random parameters that owns its buffers.
#ifndef SHARDPS_MODEL_DENSE_LAYERS_TEST_UTIL_H_
#define SHARDPS_MODEL_DENSE_LAYERS_TEST_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace shardps {

// n floats uniform in [-1, 1), from `seed`.
std::vector<float> RandomFloats(size_t n, uint32_t seed);

// Layers of widths dims ({input, widths...}) with random parameters: values[2l] is the kernel
// (dims[l] x dims[l+1]), values[2l+1] the bias; grads the same shapes, filled with -7.
struct DenseProblem {
  explicit DenseProblem(std::vector<int> dims);

  std::vector<const float*> ParamPtrs() const;
  std::vector<float*> GradPtrs();
  // Every parameter packed one after another, and where each starts (the total last).
  std::vector<float> Packed() const;
  std::vector<size_t> Offsets() const;

  std::vector<int> dims;
  std::vector<std::vector<float>> values;
  std::vector<std::vector<float>> grads;
};

}  // namespace shardps

#endif  // SHARDPS_MODEL_DENSE_LAYERS_TEST_UTIL_H_
