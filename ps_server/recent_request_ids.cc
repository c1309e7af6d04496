#include "ps_server/recent_request_ids.h"

namespace shardps {

void RecentRequestIds::Insert(uint64_t id) {
  if (capacity_ <= 0 || !ids_.insert(id).second) return;
  order_.push_back(id);
  if (static_cast<int64_t>(order_.size()) > capacity_) {
    ids_.erase(order_.front());
    order_.pop_front();
  }
}

void RecentRequestIds::Clear() {
  ids_.clear();
  order_.clear();
}

}  // namespace shardps
