#include "common/finite.h"

#include <cmath>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace shardps {
namespace {

// A float is NaN or infinite exactly when its 8 exponent bits are all ones. Adding one to the
// exponent field of such a value carries into the sign bit; for every other exponent it does
// not. OR-ing those sums over a block and testing the sign bit checks the block with integer
// operations only, without a branch per value.
constexpr uint32_t kExponent = 0x7f800000u;
constexpr uint32_t kExponentOne = 0x00800000u;
constexpr uint32_t kCarry = 0x80000000u;

// Values checked between two early-exit tests: small enough to stop soon after a bad value,
// large enough that the test costs nothing.
constexpr int64_t kBlock = 4096;

bool BlockFinite(const char* values, int64_t n) {
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256i exponent = _mm256_set1_epi32(static_cast<int>(kExponent));
  const __m256i one = _mm256_set1_epi32(static_cast<int>(kExponentOne));
  __m256i acc = _mm256_setzero_si256();
  for (; i + 8 <= n; i += 8) {
    __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + 4 * i));
    acc = _mm256_or_si256(acc, _mm256_add_epi32(_mm256_and_si256(bits, exponent), one));
  }
  if (_mm256_movemask_ps(_mm256_castsi256_ps(acc)) != 0) return false;
#endif
  uint32_t tail = 0;
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + 4 * i, sizeof(bits));
    tail |= (bits & kExponent) + kExponentOne;
  }
  return (tail & kCarry) == 0;
}

}  // namespace

int64_t FirstNonFinite(const void* data, int64_t n) {
  const char* values = static_cast<const char*>(data);
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = n - begin < kBlock ? n - begin : kBlock;
    if (BlockFinite(values + 4 * begin, count)) continue;
    for (int64_t i = begin; i < begin + count; ++i) {
      float v;
      std::memcpy(&v, values + 4 * i, sizeof(v));
      if (!std::isfinite(v)) return i;
    }
  }
  return n;
}

}  // namespace shardps
