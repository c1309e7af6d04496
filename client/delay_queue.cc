#include "client/delay_queue.h"

#include <utility>

#include "absl/time/clock.h"

namespace shardps {

DelayQueue::DelayQueue() : thread_([this] { Loop(); }) {}

DelayQueue::~DelayQueue() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

void DelayQueue::RunAt(absl::Time when, std::function<void(bool cancelled)> fn) {
  absl::MutexLock lock(&mu_);
  queue_.push(Item{when, seq_++, std::move(fn)});
}

void DelayQueue::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    absl::Time wake = queue_.empty() ? absl::Now() + absl::Milliseconds(100) : queue_.top().when;
    // Also wakes for an item added to run before `wake`, whose time is then waited for
    // (else a 1 ms backoff could wait out the 100 ms of an empty queue).
    auto ready = [this, &wake]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ ||
             (!queue_.empty() && (queue_.top().when <= absl::Now() || queue_.top().when < wake));
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), wake);
    if (stop_) break;
    if (queue_.empty() || queue_.top().when > absl::Now()) continue;
    Item item = queue_.top();
    queue_.pop();
    mu_.Unlock();
    item.fn(false);
    mu_.Lock();
  }
  // Closures still queued on shutdown are told so: their calls fail as CANCELLED.
  while (!queue_.empty()) {
    Item item = queue_.top();
    queue_.pop();
    mu_.Unlock();
    item.fn(true);
    mu_.Lock();
  }
}

}  // namespace shardps
