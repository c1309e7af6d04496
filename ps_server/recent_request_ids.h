// RecentRequestIds: the last `capacity` request ids a shard has applied, so that a retried
// mutating request (the client resends when a reply was lost) is answered as a duplicate
// instead of being applied twice (TensorFlow's RecentRequestIds). The oldest id is evicted
// first.
//
// Thread-safety: not thread-safe; a shard guards its window with the shard's mutex.
#ifndef SHARDPS_PS_SERVER_RECENT_REQUEST_IDS_H_
#define SHARDPS_PS_SERVER_RECENT_REQUEST_IDS_H_

#include <cstdint>
#include <deque>

#include "absl/container/flat_hash_set.h"

namespace shardps {

class RecentRequestIds {
 public:
  // capacity <= 0 remembers nothing.
  explicit RecentRequestIds(int64_t capacity) : capacity_(capacity) {}

  bool Contains(uint64_t id) const { return ids_.contains(id); }
  // Remembers `id` (once, however often it is inserted), evicting the oldest past capacity.
  void Insert(uint64_t id);
  // Forgets every id (a restored shard starts a new history).
  void Clear();

  int64_t size() const { return static_cast<int64_t>(order_.size()); }

 private:
  const int64_t capacity_;
  absl::flat_hash_set<uint64_t> ids_;
  std::deque<uint64_t> order_;  // oldest first
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_RECENT_REQUEST_IDS_H_
