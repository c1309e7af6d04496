// CRC-32C (Castagnoli), the checksum of every checkpoint file and tensor: the SSE4.2 crc32
// instruction where the build targets it (x86-64-v2 and up), a table otherwise. Written
// here because Debian 12's abseil predates absl/crc.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_CHECKPOINT_CRC32C_H_
#define SHARDPS_CHECKPOINT_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace shardps {

// The CRC-32C of `data` appended to bytes whose CRC-32C is `crc` (0 for none).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(absl::string_view data) {
  return Crc32cExtend(0, data.data(), data.size());
}

// The CRC-32C of A followed by B, from crc(A), crc(B) and B's length.
uint32_t Crc32cCombine(uint32_t crc_a, uint32_t crc_b, uint64_t length_b);

}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_CRC32C_H_
