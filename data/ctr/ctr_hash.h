// Counter-based hashing and random numbers for the click-log data: a 64-bit bijective mixer
// (the SplitMix64 finalizer), a SplitMix64 stream seeded from a hash, and a checksum of byte
// ranges. Everything here is a pure function of its inputs, identical on every machine and
// standard library, which is what makes the synthetic data a function of (seed, index).
//
// Thread-safety: pure functions; a SplitMix64 object is not shared between threads.
#ifndef SHARDPS_DATA_CTR_CTR_HASH_H_
#define SHARDPS_DATA_CTR_CTR_HASH_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace shardps {

// A bijection of 64-bit values that mixes every input bit into every output bit.
inline uint64_t Mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t HashCombine(uint64_t a, uint64_t b) { return Mix64(a ^ Mix64(b)); }

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    uint64_t z = state_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [0, n) for n <= 2^32 (multiply-shift; bias below 2^-32).
  uint32_t Below(uint32_t n) {
    return static_cast<uint32_t>(((Next() >> 32) * static_cast<uint64_t>(n)) >> 32);
  }

 private:
  uint64_t state_;
};

// A 64-bit checksum of `size` bytes (not cryptographic; catches flipped bits and shifts).
inline uint64_t Checksum64(const void* data, size_t size, uint64_t seed = 0) {
  const unsigned char* p = static_cast<const unsigned char*>(data);
  uint64_t h = Mix64(seed ^ size);
  size_t k = 0;
  for (; k + 8 <= size; k += 8) {
    uint64_t w;
    std::memcpy(&w, p + k, 8);
    h = (h ^ w) * 0x9fb21c651e98df25ULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + k, size - k);
  return Mix64(h ^ tail);
}

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_CTR_HASH_H_
