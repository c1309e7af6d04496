#include "common/finite.h"

#include <algorithm>
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

// RangeOf and MaxAbs against a plain loop, at every position of the vector body and the tail;
// a NaN or infinity anywhere makes the range (-inf, inf) and MaxAbs inf.
TEST(RangeTest, MatchesAPlainLoopAndNonFiniteValuesOpenIt) {
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 7, 8, 9, 31, 4097}) {
    for (int64_t pos : {int64_t{0}, n / 2, n - 1}) {
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        v[static_cast<size_t>(i)] = 0.25f * static_cast<float>(i % 13) - 1.0f;
      }
      v[static_cast<size_t>(pos)] = -7.5f;
      float lo = v[0], hi = v[0], top = 0;
      for (float x : v) {
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        top = std::max(top, std::fabs(x));
      }
      const FloatRange r = RangeOf(v.data(), n);
      EXPECT_EQ(r.lo, lo) << n;
      EXPECT_EQ(r.hi, hi) << n;
      EXPECT_EQ(MaxAbs(v.data(), n), top) << n;
      for (float bad : {std::nanf(""), kInf, -kInf}) {
        std::vector<float> w = v;
        w[static_cast<size_t>(pos)] = bad;
        const FloatRange open = RangeOf(w.data(), n);
        EXPECT_EQ(open.lo, -kInf) << n << " " << bad;
        EXPECT_EQ(open.hi, kInf) << n << " " << bad;
        EXPECT_EQ(MaxAbs(w.data(), n), kInf) << n << " " << bad;
      }
    }
  }
  EXPECT_EQ(MaxAbs(nullptr, 0), 0.0f);
  // The check with the magnitude learnt in the same pass agrees with both.
  for (int64_t n : {1, 9, 4097, 9000}) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = std::sin(0.1f * i) * i;
    float top = -1;
    EXPECT_EQ(FirstNonFinite(v.data(), n, &top), n);
    EXPECT_EQ(top, MaxAbs(v.data(), n)) << n;
    v[static_cast<size_t>(n - 1)] = std::nanf("");
    EXPECT_EQ(FirstNonFinite(v.data(), n, &top), n - 1);
    EXPECT_EQ(top, kInf);
  }
  EXPECT_EQ(RangeOf(nullptr, 0).lo, kInf);
  const float big = -3e38f;
  EXPECT_EQ(MaxAbs(&big, 1), 3e38f);
}

}  // namespace
}  // namespace shardps
