// RecentRequestIds: the last `capacity` request ids a shard has applied, so that a retried
// mutating request (the client resends when a reply was lost) is answered as a duplicate
// instead of being applied twice (TensorFlow's RecentRequestIds). The oldest id is evicted
// first.
//
// Reserve() makes room for one more id, so that an update can take every allocation before
// it changes the shard and then record its id without failing: an update that is applied is
// always remembered.
//
// Thread-safety: not thread-safe; a shard guards its window with the shard's mutex.
#ifndef SHARDPS_PS_SERVER_RECENT_REQUEST_IDS_H_
#define SHARDPS_PS_SERVER_RECENT_REQUEST_IDS_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_set.h"

namespace shardps {

class RecentRequestIds {
 public:
  // capacity <= 0 remembers nothing.
  explicit RecentRequestIds(int64_t capacity) : capacity_(capacity) {}

  bool Contains(uint64_t id) const { return ids_.contains(id); }
  // Makes room for one more id (may throw std::bad_alloc, changing nothing).
  void Reserve();
  // Remembers `id` (once, however often it is inserted), evicting the oldest past capacity.
  // Does not allocate after Reserve().
  void Insert(uint64_t id);
  // Forgets every id (a restored shard starts a new history).
  void Clear();

  int64_t size() const { return size_; }

 private:
  void Grow();

  const int64_t capacity_;
  absl::flat_hash_set<uint64_t> ids_;
  // A ring of the ids in order: ring_[(head_ + i) % ring_.size()] for i in [0, size_),
  // oldest first. Grows (doubling, up to capacity) as ids arrive.
  std::vector<uint64_t> ring_;
  size_t head_ = 0;
  int64_t size_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_RECENT_REQUEST_IDS_H_
