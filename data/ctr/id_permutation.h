// IdPermutation: a keyed bijection of [0, n) (or of all 64-bit values), used to scramble
// popularity ranks into ids so that the hottest ids are spread over the id range: a
// range-partitioned table then does not put every hot row on one shard.
//
// For n > 0: a 4-round balanced Feistel network over the smallest even number of bits
// covering n, with cycle walking (re-apply until the value falls in [0, n); expected fewer
// than 4 rounds since the domain is below 4n). For n == 0 (unbounded, hashed ids): Mix64 of
// the rank xor a key, a bijection of 64-bit values whose result is read as int64 (it may be
// negative).
//
// Thread-safety: immutable; Apply is const.
#ifndef SHARDPS_DATA_CTR_ID_PERMUTATION_H_
#define SHARDPS_DATA_CTR_ID_PERMUTATION_H_

#include <cstdint>

#include "data/ctr/ctr_hash.h"

namespace shardps {

class IdPermutation {
 public:
  // n >= 0 (0: all 64-bit values).
  IdPermutation(int64_t n, uint64_t key);

  int64_t Apply(int64_t rank) const {
    if (n_ == 0) return static_cast<int64_t>(Mix64(static_cast<uint64_t>(rank) ^ keys_[0]));
    uint64_t x = static_cast<uint64_t>(rank);
    do {
      x = Round(x);
    } while (x >= static_cast<uint64_t>(n_));
    return static_cast<int64_t>(x);
  }

 private:
  uint64_t Round(uint64_t x) const {
    uint64_t left = x >> half_bits_;
    uint64_t right = x & mask_;
    for (int r = 0; r < 4; ++r) {
      const uint64_t next = left ^ (Mix64(right ^ keys_[r]) & mask_);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  int64_t n_;
  int half_bits_ = 1;
  uint64_t mask_ = 1;
  uint64_t keys_[4];
};

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_ID_PERMUTATION_H_
