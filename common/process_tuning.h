// Process settings for daemons that move tensors: keep freed heap memory for reuse, and no
// per-lock debugging work.
//
// gRPC allocates a fresh buffer for every read from a socket and frees it once the message is
// parsed; pulls and pushes of multi-MiB tensors do the same with their chunks. With glibc's
// defaults, blocks of a few MiB are mapped and unmapped (or trimmed from the heap) each time,
// so every 4 KiB page of every transfer costs a page fault and the kernel's zeroing of the
// page. Raising the mmap and trim thresholds keeps that memory in the heap, where the next
// transfer reuses it.
//
// Thread-safety: call once, early in main(), before other threads start.
#ifndef SHARDPS_COMMON_MALLOC_TUNING_H_
#define SHARDPS_COMMON_MALLOC_TUNING_H_

namespace shardps {

// Blocks below 32 MiB come from the heap, and up to 512 MiB of free heap is kept rather
// than returned to the kernel. Returns false if the C library refused a setting.
bool TuneMallocForBulkTransfers();

// Turns off Abseil's mutex deadlock detection, which Debian's Abseil (built without NDEBUG)
// runs on every lock: a graph lookup per acquisition, seen in the data path's profiles.
// Daemons and benchmarks call it; tests keep the detection.
void DisableMutexDeadlockDetection();

}  // namespace shardps

#endif  // SHARDPS_COMMON_MALLOC_TUNING_H_
