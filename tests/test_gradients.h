// Deterministic gradients whose float sums are exact (small multiples of 1/64), so a test can
// check that concurrent pushes lost no update with exact equality.
#ifndef SHARDPS_TESTS_TEST_GRADIENTS_H_
#define SHARDPS_TESTS_TEST_GRADIENTS_H_

#include <cstdint>
#include <vector>

namespace shardps {
namespace testing {

inline std::vector<float> TestGradient(int64_t client, int64_t push, int64_t n) {
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) {
    g[i] = static_cast<float>((client * 5 + push * 3 + i) % 7 - 3) / 64.0f;
  }
  return g;
}

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_TEST_GRADIENTS_H_
