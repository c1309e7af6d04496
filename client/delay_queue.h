// DelayQueue: runs closures at a given time on one thread of its own: the client's backoff
// before a retry, without sleeping on an RPC completion thread. Closures run one at a time,
// in order of their time (those of the same time in the order they were added).
//
// Thread-safety: thread-safe. The destructor stops the thread: closures still queued then
// run at once, in order, with cancelled = true, before it returns.
#ifndef SHARDPS_CLIENT_DELAY_QUEUE_H_
#define SHARDPS_CLIENT_DELAY_QUEUE_H_

#include <cstdint>
#include <functional>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardps {

class DelayQueue {
 public:
  DelayQueue();
  ~DelayQueue();
  DelayQueue(const DelayQueue&) = delete;
  DelayQueue& operator=(const DelayQueue&) = delete;

  // fn(false) runs at `when`; fn(true) runs instead if the queue is destroyed first.
  void RunAt(absl::Time when, std::function<void(bool cancelled)> fn);

 private:
  struct Item {
    absl::Time when;
    uint64_t seq;
    std::function<void(bool)> fn;
    bool operator>(const Item& o) const { return when != o.when ? when > o.when : seq > o.seq; }
  };

  void Loop();

  absl::Mutex mu_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t seq_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is initialized
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_DELAY_QUEUE_H_
