#include "common/process_tuning.h"

#include <malloc.h>

#include "absl/synchronization/mutex.h"

namespace shardps {

bool TuneMallocForBulkTransfers() {
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit (HEAP_MAX_SIZE / 2).
  bool ok = mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1;
  ok = mallopt(M_TRIM_THRESHOLD, 512 << 20) == 1 && ok;
  return ok;
}

void DisableMutexDeadlockDetection() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace shardps
