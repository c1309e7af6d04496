#include "client/buffer_pool.h"

#include <utility>

namespace shardps {

std::string BufferPool::Get() {
  absl::MutexLock lock(&mu_);
  if (free_.empty()) return std::string();
  std::string buffer = std::move(free_.back());
  free_.pop_back();
  bytes_ -= buffer.capacity();
  return buffer;
}

void BufferPool::Put(std::string buffer) {
  const size_t capacity = buffer.capacity();
  if (capacity < kMinBytes) return;
  absl::MutexLock lock(&mu_);
  if (bytes_ + capacity > kMaxBytes) return;  // freed after the lock is released
  bytes_ += capacity;
  free_.push_back(std::move(buffer));
}

}  // namespace shardps
