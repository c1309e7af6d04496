#include "data/ctr/id_permutation.h"

namespace shardps {

IdPermutation::IdPermutation(int64_t n, uint64_t key) : n_(n < 0 ? 0 : n) {
  for (int r = 0; r < 4; ++r) keys_[r] = Mix64(key + 0x51ed270b27a3c1d5ULL * (r + 1));
  if (n_ > 0) {
    int bits = 2;
    while (bits < 63 && (uint64_t{1} << bits) < static_cast<uint64_t>(n_)) ++bits;
    if (bits % 2 == 1) ++bits;
    half_bits_ = bits / 2;
    mask_ = (uint64_t{1} << half_bits_) - 1;
  }
}

}  // namespace shardps
