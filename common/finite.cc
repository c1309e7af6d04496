#include "common/finite.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

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

// Whether values[0, n) are all finite, one OR of exponent sums over the block (the vector
// body, then the tail); when they are, raises *top to the largest magnitude's bits (the sign
// cleared, which order as |value| does). The max rides along at no cost: the loop is bound by
// memory.
bool BlockFiniteMax(const char* values, int64_t n, uint32_t* top) {
  constexpr uint32_t kMagnitude = 0x7fffffffu;
  int64_t i = 0;
  uint32_t t = *top;
#if defined(__AVX2__)
  const __m256i exponent = _mm256_set1_epi32(static_cast<int>(kExponent));
  const __m256i one = _mm256_set1_epi32(static_cast<int>(kExponentOne));
  const __m256i magnitude = _mm256_set1_epi32(static_cast<int>(kMagnitude));
  __m256i acc = _mm256_setzero_si256();
  __m256i vtop = _mm256_setzero_si256();
  for (; i + 8 <= n; i += 8) {
    __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + 4 * i));
    acc = _mm256_or_si256(acc, _mm256_add_epi32(_mm256_and_si256(bits, exponent), one));
    vtop = _mm256_max_epu32(vtop, _mm256_and_si256(bits, magnitude));
  }
  if (_mm256_movemask_ps(_mm256_castsi256_ps(acc)) != 0) return false;
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), vtop);
  for (uint32_t lane : lanes) t = std::max(t, lane);
#endif
  uint32_t tail = 0;
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + 4 * i, sizeof(bits));
    tail |= (bits & kExponent) + kExponentOne;
    t = std::max(t, bits & kMagnitude);
  }
  if ((tail & kCarry) != 0) return false;
  *top = t;
  return true;
}

}  // namespace

int64_t FirstNonFinite(const void* data, int64_t n, float* max_abs) {
  const char* values = static_cast<const char*>(data);
  uint32_t top = 0;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t count = n - begin < kBlock ? n - begin : kBlock;
    if (BlockFiniteMax(values + 4 * begin, count, &top)) continue;
    *max_abs = std::numeric_limits<float>::infinity();
    for (int64_t i = begin; i < begin + count; ++i) {
      float v;
      std::memcpy(&v, values + 4 * i, sizeof(v));
      if (!std::isfinite(v)) return i;
    }
  }
  std::memcpy(max_abs, &top, sizeof(top));
  return n;
}

int64_t FirstNonFinite(const void* data, int64_t n) {
  float max_abs;
  return FirstNonFinite(data, n, &max_abs);
}

FloatRange RangeOf(const void* data, int64_t n) {
  const char* values = static_cast<const char*>(data);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  float lo = kInf, hi = -kInf;
  uint32_t tail = 0;
  int64_t i = 0;
#if defined(__AVX2__)
  const __m256i exponent = _mm256_set1_epi32(static_cast<int>(kExponent));
  const __m256i one = _mm256_set1_epi32(static_cast<int>(kExponentOne));
  __m256i acc = _mm256_setzero_si256();
  __m256 vlo = _mm256_set1_ps(kInf), vhi = _mm256_set1_ps(-kInf);
  for (; i + 8 <= n; i += 8) {
    const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(values + 4 * i));
    acc = _mm256_or_si256(acc, _mm256_add_epi32(_mm256_and_si256(bits, exponent), one));
    const __m256 v = _mm256_castsi256_ps(bits);
    vlo = _mm256_min_ps(vlo, v);
    vhi = _mm256_max_ps(vhi, v);
  }
  if (_mm256_movemask_ps(_mm256_castsi256_ps(acc)) != 0) return {-kInf, kInf};
  alignas(32) float l[8], h[8];
  _mm256_store_ps(l, vlo);
  _mm256_store_ps(h, vhi);
  for (int k = 0; k < 8; ++k) {
    lo = std::min(lo, l[k]);
    hi = std::max(hi, h[k]);
  }
#endif
  for (; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, values + 4 * i, sizeof(bits));
    tail |= (bits & kExponent) + kExponentOne;
    float v;
    std::memcpy(&v, values + 4 * i, sizeof(v));
    lo = v < lo ? v : lo;
    hi = v > hi ? v : hi;
  }
  if ((tail & kCarry) != 0) return {-kInf, kInf};
  return {lo, hi};
}

float MaxAbs(const void* data, int64_t n) {
  float max_abs = 0;
  FirstNonFinite(data, n, &max_abs);
  return max_abs;
}

}  // namespace shardps
