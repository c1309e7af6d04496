// The implementations behind Crc32cExtend (crc32c.h), exposed so that tests check each on
// one build: the portable table (slicing by 8), the SSE4.2 crc32 instruction (three
// interleaved streams), and carry-less multiply folding (PCLMULQDQ, chosen at run time).
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

// Whether this build and CPU have the folding implementation (x86-64 with SSE4.2 built in
// and PCLMULQDQ found at run time).
bool HaveFolding();

// Four 128-bit lanes folded 64 bytes at a time with PCLMULQDQ, reduced with crc32; the tail
// by ExtendHardware. Where !HaveFolding(), ExtendHardware. On CPUs whose crc32 instruction
// issues once in three cycles (AMD Zen 1) it is the faster path for large buffers.
uint32_t ExtendFolding(uint32_t crc, const void* data, size_t n);

// Buffers from this size on take the folding path.
inline constexpr size_t kFoldingMinBytes = 512;

}  // namespace crc32c_internal
}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_CRC32C_INTERNAL_H_
