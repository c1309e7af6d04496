#include "common/finite.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(FirstNonFiniteTest, AllFiniteReturnsLength) {
  std::vector<float> v(10007);
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 2 ? -1.0f : 1.0f) * static_cast<float>(i);
  v[3] = std::numeric_limits<float>::max();
  v[4] = -std::numeric_limits<float>::max();
  v[5] = std::numeric_limits<float>::denorm_min();
  v[6] = -0.0f;
  EXPECT_EQ(FirstNonFinite(v.data(), static_cast<int64_t>(v.size())),
            static_cast<int64_t>(v.size()));
  EXPECT_EQ(FirstNonFinite(v.data(), 0), 0);
}

TEST(FirstNonFiniteTest, FindsEachKindAtEveryPosition) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       -std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  // Positions in the vector body, the scalar tail and across the 4096-value blocks.
  for (int64_t n : {1, 7, 8, 9, 4095, 4096, 4097, 9000}) {
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      for (float b : bad) {
        std::vector<float> v(static_cast<size_t>(n), 0.5f);
        v[static_cast<size_t>(pos)] = b;
        ASSERT_EQ(FirstNonFinite(v.data(), n), pos) << "n=" << n << " value=" << b;
      }
    }
  }
}

TEST(FirstNonFiniteTest, ReportsTheFirstOfSeveral) {
  std::vector<float> v(5000, 1.0f);
  v[4500] = std::numeric_limits<float>::infinity();
  v[4200] = std::nanf("");
  EXPECT_EQ(FirstNonFinite(v.data(), 5000), 4200);
}

TEST(FirstNonFiniteTest, UnalignedInput) {
  std::vector<float> v(100, 2.0f);
  v[50] = std::nanf("");
  std::vector<char> raw(101 * sizeof(float) + 1);
  std::memcpy(raw.data() + 1, v.data(), 100 * sizeof(float));
  const float* unaligned = reinterpret_cast<const float*>(raw.data() + 1);
  EXPECT_EQ(FirstNonFinite(unaligned, 100), 50);
}

}  // namespace
}  // namespace shardps
