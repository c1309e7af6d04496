#include "ps_server/gradient_bytes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

// `floats` as bytes placed at byte `shift` of a buffer (so misaligned when shift % 4 != 0),
// cut into pieces at the given byte offsets.
struct Split {
  Split(const std::vector<float>& floats, int shift, std::vector<size_t> cuts) {
    buffer.assign(static_cast<size_t>(shift), 'x');
    buffer.append(reinterpret_cast<const char*>(floats.data()), floats.size() * 4);
    const absl::string_view all = absl::string_view(buffer).substr(static_cast<size_t>(shift));
    size_t at = 0;
    cuts.push_back(all.size());
    for (size_t cut : cuts) {
      pieces.push_back(all.substr(at, cut - at));
      at = cut;
    }
  }
  std::string buffer;
  std::vector<absl::string_view> pieces;
};

std::vector<float> Iota(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) - 7.0f;
  return v;
}

// Reassembles floats [begin, end) through ForEachRun, checking that runs are consecutive.
std::vector<float> ViaRuns(const GradientBytes& g, int64_t begin, int64_t end) {
  std::vector<float> out;
  int64_t next = begin;
  g.ForEachRun(begin, end, [&](int64_t first, const float* values, int64_t n) {
    EXPECT_EQ(first, next);
    EXPECT_GT(n, 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(values) % alignof(float), 0u);
    out.insert(out.end(), values, values + n);
    next = first + n;
  });
  EXPECT_EQ(next, end);
  return out;
}

TEST(GradientBytesTest, OnePieceAlignedIsReadInPlace) {
  const std::vector<float> v = Iota(10000);
  const absl::string_view bytes(reinterpret_cast<const char*>(v.data()), v.size() * 4);
  GradientBytes g(bytes);
  EXPECT_EQ(g.size_bytes(), 40000);
  int runs = 0;
  g.ForEachRun(0, 10000, [&](int64_t first, const float* values, int64_t n) {
    ++runs;
    EXPECT_EQ(first, 0);
    EXPECT_EQ(values, v.data());
    EXPECT_EQ(n, 10000);
  });
  EXPECT_EQ(runs, 1);
  EXPECT_EQ(g.FirstNonFinite(), 10000);
}

TEST(GradientBytesTest, EveryCutAndShiftReadsTheSameFloats) {
  const std::vector<float> v = Iota(40000);  // more than two scratch blocks
  std::mt19937 rng(7);
  for (int shift = 0; shift < 4; ++shift) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<size_t> cuts;
      std::uniform_int_distribution<size_t> at(1, v.size() * 4 - 1);
      for (int c = 0; c < trial; ++c) cuts.push_back(at(rng));
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      Split split(v, shift, cuts);
      GradientBytes g(split.pieces);
      ASSERT_EQ(g.size_bytes(), static_cast<int64_t>(v.size() * 4));
      EXPECT_EQ(ViaRuns(g, 0, 40000), v) << "shift " << shift << " trial " << trial;
      const std::vector<float> mid = ViaRuns(g, 1234, 5678);
      EXPECT_TRUE(std::equal(mid.begin(), mid.end(), v.begin() + 1234));
      std::vector<float> copied(100);
      g.CopyTo(4000, 4100, copied.data());
      EXPECT_TRUE(std::equal(copied.begin(), copied.end(), v.begin() + 4000));
      EXPECT_EQ(g.At(39999), v[39999]);
      EXPECT_EQ(g.FirstNonFinite(), 40000);
      // The largest magnitude, learnt in the same pass wherever the pieces cut the floats.
      float max_abs = -1;
      EXPECT_EQ(g.FirstNonFinite(&max_abs), 40000);
      float want = 0;
      for (float x : v) want = std::max(want, std::fabs(x));
      EXPECT_EQ(max_abs, want) << "shift " << shift << " trial " << trial;
    }
  }
}

TEST(GradientBytesTest, FindsNonFiniteValuesAcrossPieces) {
  const float bad[] = {std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::infinity(),
                       -std::numeric_limits<float>::infinity()};
  for (float value : bad) {
    for (size_t where : {size_t{0}, size_t{1}, size_t{2}, size_t{4095}, size_t{4999}}) {
      std::vector<float> v = Iota(5000);
      v[where] = value;
      // Cuts through the middle of the bad float and elsewhere.
      std::vector<size_t> cuts = {7, where * 4 + 2, 16383};
      std::sort(cuts.begin(), cuts.end());
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      Split split(v, 3, cuts);
      GradientBytes g(split.pieces);
      EXPECT_EQ(g.FirstNonFinite(), static_cast<int64_t>(where)) << value << " at " << where;
      const float got = g.At(static_cast<int64_t>(where));
      EXPECT_EQ(std::isnan(got), std::isnan(value));
      if (!std::isnan(value)) {
        EXPECT_EQ(got, value);
      }
    }
  }
}

TEST(GradientBytesTest, SubViewsAndEmptyPieces) {
  const std::vector<float> v = Iota(300);
  Split split(v, 1, {5, 5, 400, 401, 1199});  // an empty piece between the two 5s
  GradientBytes g(split.pieces);
  GradientBytes sub = g.Sub(4 * 100, 4 * 150);
  EXPECT_EQ(sub.size_bytes(), 600);
  const std::vector<float> got = ViaRuns(sub, 0, 150);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), v.begin() + 100));
  EXPECT_EQ(g.Sub(0, 0).size_bytes(), 0);
  EXPECT_EQ(g.Sub(0, 0).FirstNonFinite(), 0);
  EXPECT_EQ(GradientBytes().FirstNonFinite(), 0);
  ViaRuns(GradientBytes(), 0, 0);
}

TEST(GradientBytesTest, TrailingPartialFloatIsNotAFloat) {
  const std::vector<float> v = Iota(3);
  std::string bytes(reinterpret_cast<const char*>(v.data()), 12);
  bytes.push_back(static_cast<char>(0xff));
  const GradientBytes g{absl::string_view(bytes)};
  EXPECT_EQ(g.size_bytes(), 13);
  EXPECT_EQ(g.FirstNonFinite(), 3);
}

}  // namespace
}  // namespace shardps
