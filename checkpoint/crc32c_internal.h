// The two implementations behind Crc32cExtend (crc32c.h), exposed so that tests check both
// on one build: the portable table (slicing by 8) and the SSE4.2 crc32 instruction.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_CHECKPOINT_CRC32C_INTERNAL_H_
#define SHARDPS_CHECKPOINT_CRC32C_INTERNAL_H_

#include <cstddef>
#include <cstdint>

namespace shardps {
namespace crc32c_internal {

// Table-driven, any CPU. Crc32cExtend's implementation where __SSE4_2__ is not defined.
uint32_t ExtendPortable(uint32_t crc, const void* data, size_t n);

// Whether this build has the SSE4.2 implementation (compiled with -msse4.2 or a superset).
bool HaveHardware();

// Three interleaved crc32 streams combined by table shifts. Only when HaveHardware();
// otherwise the portable implementation.
uint32_t ExtendHardware(uint32_t crc, const void* data, size_t n);

}  // namespace crc32c_internal
}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_CRC32C_INTERNAL_H_
