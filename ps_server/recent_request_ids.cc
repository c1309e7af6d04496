#include "ps_server/recent_request_ids.h"

#include <algorithm>

namespace shardps {

void RecentRequestIds::Reserve() {
  if (capacity_ <= 0) return;
  ids_.reserve(ids_.size() + 1);
  if (size_ == static_cast<int64_t>(ring_.size()) && size_ < capacity_) Grow();
}

void RecentRequestIds::Grow() {
  // A larger ring, oldest first.
  const size_t grown = static_cast<size_t>(
      std::min<int64_t>(capacity_, std::max<int64_t>(16, 2 * static_cast<int64_t>(ring_.size()))));
  std::vector<uint64_t> ring(grown);
  for (int64_t i = 0; i < size_; ++i) {
    ring[static_cast<size_t>(i)] = ring_[(head_ + static_cast<size_t>(i)) % ring_.size()];
  }
  ring_ = std::move(ring);
  head_ = 0;
}

void RecentRequestIds::Insert(uint64_t id) {
  if (capacity_ <= 0) return;
  if (size_ == static_cast<int64_t>(ring_.size()) && size_ < capacity_) Grow();
  if (!ids_.insert(id).second) return;
  if (size_ == capacity_) {
    // Full: the oldest makes way, and its slot takes the new id.
    ids_.erase(ring_[head_]);
    ring_[head_] = id;
    head_ = head_ + 1 == ring_.size() ? 0 : head_ + 1;
  } else {
    size_t tail = head_ + static_cast<size_t>(size_);
    if (tail >= ring_.size()) tail -= ring_.size();
    ring_[tail] = id;
    ++size_;
  }
}

void RecentRequestIds::Clear() {
  ids_.clear();
  ring_.clear();
  head_ = 0;
  size_ = 0;
}

}  // namespace shardps
