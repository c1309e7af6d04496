#include "checkpoint/crc32c.h"

#include <cstring>

#include "checkpoint/crc32c_internal.h"

#ifdef __SSE4_2__
#include <nmmintrin.h>
#endif

namespace shardps {
namespace {

// CRC-32C's polynomial, bit-reflected: bit 31 of a register is the coefficient of x^0.
constexpr uint32_t kPoly = 0x82F63B78u;
constexpr uint32_t kOne = 0x80000000u;  // the polynomial 1

// a * b modulo the polynomial, in the reflected representation.
uint32_t MulMod(uint32_t a, uint32_t b) {
  uint32_t product = 0;
  // Walk a's coefficients from x^0 (bit 31) up, multiplying b by x at each step.
  for (uint32_t bit = kOne; bit != 0; bit >>= 1) {
    if (a & bit) product ^= b;
    b = (b & 1) ? (b >> 1) ^ kPoly : b >> 1;
  }
  return product;
}

struct Tables {
  // x^(2^k) mod P for k = 0..66, so that x^(8n) for any 64-bit n is a product of them.
  uint32_t x_pow2[67];
  // Slicing-by-8: bytes[k][v] is the register after v is fed, followed by k zero bytes.
  uint32_t bytes[8][256];
  // Register shifts over kLong and kShort zero bytes, one table per register byte.
  uint32_t shift_long[4][256];
  uint32_t shift_short[4][256];
};

// Stream lengths of the three-way interleaved hardware loop: large blocks of 3 * kLong bytes,
// then blocks of 3 * kShort for the rest.
constexpr size_t kLong = 8192;
constexpr size_t kShort = 256;

uint32_t XPow8n(const Tables& t, uint64_t n) {
  uint32_t p = kOne;
  for (int k = 3; n != 0; n >>= 1, ++k) {
    if (n & 1) p = MulMod(t.x_pow2[k], p);
  }
  return p;
}

void FillShift(const Tables& t, uint64_t zeros, uint32_t (*table)[256]) {
  const uint32_t factor = XPow8n(t, zeros);
  for (int k = 0; k < 4; ++k) {
    for (uint32_t v = 0; v < 256; ++v) table[k][v] = MulMod(factor, v << (8 * k));
  }
}

const Tables& GetTables() {
  static const Tables* const tables = [] {
    auto* t = new Tables;
    t->x_pow2[0] = kOne >> 1;  // x
    for (int k = 1; k < 67; ++k) t->x_pow2[k] = MulMod(t->x_pow2[k - 1], t->x_pow2[k - 1]);
    for (uint32_t v = 0; v < 256; ++v) {
      uint32_t c = v;
      for (int i = 0; i < 8; ++i) c = (c & 1) ? (c >> 1) ^ kPoly : c >> 1;
      t->bytes[0][v] = c;
    }
    for (int k = 1; k < 8; ++k) {
      for (uint32_t v = 0; v < 256; ++v) {
        const uint32_t prev = t->bytes[k - 1][v];
        t->bytes[k][v] = (prev >> 8) ^ t->bytes[0][prev & 0xff];
      }
    }
    FillShift(*t, kLong, t->shift_long);
    FillShift(*t, kShort, t->shift_short);
    return t;
  }();
  return *tables;
}

inline uint32_t Shift(const uint32_t (*table)[256], uint32_t reg) {
  return table[0][reg & 0xff] ^ table[1][(reg >> 8) & 0xff] ^ table[2][(reg >> 16) & 0xff] ^
         table[3][reg >> 24];
}

inline uint32_t LoadLe32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

#ifdef __SSE4_2__
inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Three independent streams over [p, p + 3 * len) keep the crc32 unit busy (its latency is
// three times its issue rate); the streams' registers are then joined by shifting.
inline uint64_t ThreeStreams(uint64_t reg, const uint8_t* p, size_t len,
                             const uint32_t (*shift)[256]) {
  uint64_t c0 = reg, c1 = 0, c2 = 0;
  const uint8_t* const end = p + len;
  do {
    c0 = _mm_crc32_u64(c0, Load64(p));
    c1 = _mm_crc32_u64(c1, Load64(p + len));
    c2 = _mm_crc32_u64(c2, Load64(p + 2 * len));
    p += 8;
  } while (p < end);
  uint32_t joined = Shift(shift, static_cast<uint32_t>(c0)) ^ static_cast<uint32_t>(c1);
  return Shift(shift, joined) ^ static_cast<uint32_t>(c2);
}
#endif

}  // namespace

namespace crc32c_internal {

uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n) {
  const Tables& t = GetTables();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n) {
    c = t.bytes[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  }
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = c ^ LoadLe32(p);
    const uint32_t hi = LoadLe32(p + 4);
    c = t.bytes[7][lo & 0xff] ^ t.bytes[6][(lo >> 8) & 0xff] ^ t.bytes[5][(lo >> 16) & 0xff] ^
        t.bytes[4][lo >> 24] ^ t.bytes[3][hi & 0xff] ^ t.bytes[2][(hi >> 8) & 0xff] ^
        t.bytes[1][(hi >> 16) & 0xff] ^ t.bytes[0][hi >> 24];
  }
  for (; n > 0; --n) c = t.bytes[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

#ifdef __SSE4_2__
bool HaveHardware() { return true; }

uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = static_cast<uint32_t>(~crc);
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n) c = _mm_crc32_u8(c, *p++);
  if (n >= 3 * kShort) {
    const Tables& t = GetTables();
    for (; n >= 3 * kLong; n -= 3 * kLong, p += 3 * kLong) {
      c = ThreeStreams(c, p, kLong, t.shift_long);
    }
    for (; n >= 3 * kShort; n -= 3 * kShort, p += 3 * kShort) {
      c = ThreeStreams(c, p, kShort, t.shift_short);
    }
  }
  for (; n >= 8; n -= 8, p += 8) c = _mm_crc32_u64(c, Load64(p));
  for (; n > 0; --n) c = _mm_crc32_u8(c, *p++);
  return ~static_cast<uint32_t>(c);
}
#else
bool HaveHardware() { return false; }

uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n) {
  return ExtendPortable(crc, data, n);
}
#endif

}  // namespace crc32c_internal

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
#ifdef __SSE4_2__
  return crc32c_internal::ExtendHardware(crc, data, n);
#else
  return crc32c_internal::ExtendPortable(crc, data, n);
#endif
}

// crc(A || B) = crc(A) * x^(8 |B|) + crc(B): the pre- and post-inversions of the two CRCs
// cancel, leaving A's register carried over B's length of zeros.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b) {
  if (length_b == 0) return crc_a;
  return MulMod(XPow8n(GetTables(), length_b), crc_a) ^ crc_b;
}

}  // namespace shardps
