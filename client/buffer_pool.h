// BufferPool: recycles the byte buffers that carry tensors in chunk messages (pulled and
// pushed bytes), so that repeated transfers reuse memory that is already allocated and
// faulted in: a fresh multi-MiB allocation per chunk costs the kernel a page fault and a
// page zeroing per 4 KiB, more than the copy into it. A pulled chunk is parsed into a
// recycled string (protobuf's parser keeps a string's capacity), a pushed chunk is copied
// into one. Keeps at most kMaxBytes of capacity; buffers too small to matter are not kept.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_CLIENT_BUFFER_POOL_H_
#define SHARDPS_CLIENT_BUFFER_POOL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

class BufferPool {
 public:
  static constexpr size_t kMinBytes = 64 << 10;
  static constexpr size_t kMaxBytes = size_t{128} << 20;

  // A kept buffer (any size, its capacity kept), or an empty string when none is kept.
  std::string Get();
  // Keeps `buffer` for a later Get when its capacity is at least kMinBytes and the pool's
  // would stay within kMaxBytes; frees it otherwise.
  void Put(std::string buffer);

 private:
  absl::Mutex mu_;
  std::vector<std::string> free_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_BUFFER_POOL_H_
