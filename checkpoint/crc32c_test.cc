#include "checkpoint/crc32c.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "checkpoint/crc32c_internal.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ExtendFn = uint32_t (*)(uint32_t, const void*, size_t);

// Bit-at-a-time CRC-32C, straight from the definition: the reference for the fast ones.
uint32_t Reference(const std::string& data) {
  uint32_t c = 0xFFFFFFFFu;
  for (unsigned char byte : data) {
    c ^= byte;
    for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

struct Impl {
  const char* name;
  ExtendFn fn;
};

class Crc32cImplTest : public ::testing::TestWithParam<Impl> {
 protected:
  void SetUp() override {
    if (GetParam().fn == crc32c_internal::ExtendHardware && !crc32c_internal::HaveHardware()) {
      GTEST_SKIP() << "this build has no SSE4.2 (compiled without __SSE4_2__): the hardware "
                      "implementation is the portable one here";
    }
  }
  uint32_t Crc(const std::string& s) const { return GetParam().fn(0, s.data(), s.size()); }
};

TEST_P(Crc32cImplTest, KnownValues) {
  EXPECT_EQ(Crc("123456789"), 0xE3069283u);
  EXPECT_EQ(Crc(std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc(std::string(32, '\xFF')), 0x62A8AB43u);
  EXPECT_EQ(Crc(""), 0u);
}

TEST_P(Crc32cImplTest, MatchesReferenceAtEveryLengthAndAlignment) {
  // Lengths across every path: bytes, words, both three-stream block sizes and their tails.
  const std::string data = RandomBytes(3 * 8192 * 2 + 3 * 256 + 100, 1);
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 800; ++n) lengths.push_back(n);
  for (size_t n : {3 * 8192 - 1, 3 * 8192, 3 * 8192 + 1, 3 * 8192 + 3 * 256 + 7, 6 * 8192,
                   6 * 8192 + 3 * 256 + 99}) {
    lengths.push_back(n);
  }
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n : lengths) {
      if (offset + n > data.size()) continue;
      const std::string piece = data.substr(offset, n);
      ASSERT_EQ(GetParam().fn(0, data.data() + offset, n), Reference(piece))
          << "offset " << offset << " length " << n;
    }
  }
}

TEST_P(Crc32cImplTest, ExtendInPiecesEqualsWhole) {
  const std::string data = RandomBytes(100000, 2);
  const uint32_t whole = Crc(data);
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    uint32_t crc = 0;
    size_t at = 0;
    while (at < data.size()) {
      const size_t n = std::min<size_t>(data.size() - at, rng() % 30000);
      crc = GetParam().fn(crc, data.data() + at, n);
      at += n;
    }
    ASSERT_EQ(crc, whole) << "trial " << trial;
  }
}

INSTANTIATE_TEST_SUITE_P(Both, Crc32cImplTest,
                         ::testing::Values(Impl{"Portable", crc32c_internal::ExtendPortable},
                                           Impl{"Hardware", crc32c_internal::ExtendHardware}),
                         [](const ::testing::TestParamInfo<Impl>& info) {
                           return std::string(info.param.name);
                         });

TEST(Crc32cTest, PublicFunctionMatchesReference) {
  EXPECT_EQ(Crc32c("123456789"), 0xE3069283u);
  const std::string data = RandomBytes(70000, 4);
  EXPECT_EQ(Crc32c(data), Reference(data));
}

TEST(Crc32cTest, CombineEqualsDirectAtManySplitPoints) {
  const std::string data = RandomBytes(40000, 5);
  const uint32_t whole = Crc32c(data);
  std::vector<size_t> splits;
  for (size_t i = 0; i <= 300; ++i) splits.push_back(i);
  for (size_t i = 301; i < data.size(); i += 997) splits.push_back(i);
  for (size_t i = data.size() - 300; i <= data.size(); ++i) splits.push_back(i);
  for (size_t split : splits) {
    const absl::string_view a(data.data(), split);
    const absl::string_view b(data.data() + split, data.size() - split);
    ASSERT_EQ(Crc32cCombine(Crc32c(a), Crc32c(b), b.size()), whole) << "split at " << split;
  }
}

TEST(Crc32cTest, CombineOverLongZeroRuns) {
  // Lengths past 32 bits: combining with crc(zeros) must equal extending over those zeros,
  // checked here with a length whose zeros fit in memory and one that exercises high bits
  // through associativity: (A + Z1) + Z2 == A + (Z1 + Z2).
  const std::string a = RandomBytes(1000, 6);
  const std::string zeros(1 << 20, '\0');
  const uint32_t crc_zeros = Crc32c(zeros);
  EXPECT_EQ(Crc32cCombine(Crc32c(a), crc_zeros, zeros.size()), Crc32c(a + zeros));
  const uint64_t big = uint64_t{5} << 33;
  const uint32_t crc_b = 0x12345678u, crc_c = 0x9ABCDEF0u;
  const uint32_t left = Crc32cCombine(Crc32cCombine(Crc32c(a), crc_b, big), crc_c, 77);
  const uint32_t right = Crc32cCombine(Crc32c(a), Crc32cCombine(crc_b, crc_c, 77), big + 77);
  EXPECT_EQ(left, right);
  EXPECT_EQ(Crc32cCombine(0xDEADBEEFu, 0, 0), 0xDEADBEEFu);
}

}  // namespace
}  // namespace shardps
