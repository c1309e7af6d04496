#include "ps_server/recent_request_ids.h"

#include <algorithm>

namespace shardps {

void RecentRequestIds::Reserve() {
  if (capacity_ <= 0) return;
  ids_.reserve(ids_.size() + 1);
  if (size_ < static_cast<int64_t>(ring_.size()) || size_ >= capacity_) return;
  // Full but below capacity: a larger ring, oldest first.
  const size_t grown = static_cast<size_t>(
      std::min<int64_t>(capacity_, std::max<int64_t>(16, 2 * static_cast<int64_t>(ring_.size()))));
  std::vector<uint64_t> ring(grown);
  for (int64_t i = 0; i < size_; ++i) ring[static_cast<size_t>(i)] = ring_[(head_ + i) % ring_.size()];
  ring_ = std::move(ring);
  head_ = 0;
}

void RecentRequestIds::Insert(uint64_t id) {
  if (capacity_ <= 0 || ids_.contains(id)) return;
  Reserve();  // a no-op when the caller reserved
  if (size_ == capacity_) {
    // Full: the oldest makes way, and its slot takes the new id.
    ids_.erase(ring_[head_]);
    ring_[head_] = id;
    head_ = (head_ + 1) % ring_.size();
  } else {
    ring_[(head_ + static_cast<size_t>(size_)) % ring_.size()] = id;
    ++size_;
  }
  ids_.insert(id);
}

void RecentRequestIds::Clear() {
  ids_.clear();
  ring_.clear();
  head_ = 0;
  size_ = 0;
}

}  // namespace shardps
