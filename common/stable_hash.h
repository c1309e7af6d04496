// StableHash: a 64-bit hash that is the same in every process, build and machine (absl::Hash
// is seeded per process), for ids that two processes must compute alike: a step's
// idempotency key (worker/step_executor.h) and the request ids of its pushes
// (client/request_ids.h). FNV-1a over the bytes added, finished by SplitMix64's finalizer,
// which spreads FNV's weak high bits; never 0 (0 means "no key" to its users).
//
// Thread-safety: a value type; one object is used by one thread.
#ifndef SHARDPS_COMMON_STABLE_HASH_H_
#define SHARDPS_COMMON_STABLE_HASH_H_

#include <cstddef>
#include <cstdint>

namespace shardps {

class StableHash {
 public:
  StableHash& AddBytes(const void* data, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h_ = (h_ ^ p[i]) * 0x100000001b3ULL;
    return *this;
  }
  // Its 8 bytes, least significant first (the same on every machine).
  StableHash& AddU64(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      const unsigned char byte = static_cast<unsigned char>(v >> (8 * i));
      AddBytes(&byte, 1);
    }
    return *this;
  }
  uint64_t Finish() const {
    uint64_t h = h_;
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h == 0 ? 1 : h;
  }

 private:
  uint64_t h_ = 0xcbf29ce484222325ULL;  // FNV-1a's offset basis
};

}  // namespace shardps

#endif  // SHARDPS_COMMON_STABLE_HASH_H_
