#include "ps_server/version_waiters.h"

#include <iterator>
#include <new>
#include <utility>

#include "absl/time/clock.h"

namespace shardps {

void VersionWaiter::Finish(const absl::Status& status) {
  std::function<void(const absl::Status&)> finish = std::move(done);
  done = nullptr;
  fill = nullptr;
  on_timeout = nullptr;
  finish(status);
}

void VersionWaiters::Add(WaiterPtr waiter) {
  VersionWaiter* w = waiter.get();
  const int64_t min_version = w->min_version;
  w->shard_it_ = waiters_.emplace(min_version, std::move(waiter));
  w->in_shard_ = true;
}

void VersionWaiters::Remove(VersionWaiter& waiter) {
  if (!waiter.in_shard_) return;
  waiters_.erase(waiter.shard_it_);
  waiter.in_shard_ = false;
}

size_t VersionWaiters::CountReady(int64_t version) const {
  return static_cast<size_t>(std::distance(waiters_.begin(), waiters_.upper_bound(version)));
}

void VersionWaiters::TakeReady(int64_t version, std::vector<WaiterPtr>* ready) {
  const auto end = waiters_.upper_bound(version);
  if (waiters_.begin() == end) return;
  // Room first: a waiter claimed must reach `ready`, or nobody would ever finish it.
  ready->reserve(ready->size() + static_cast<size_t>(std::distance(waiters_.begin(), end)));
  for (auto it = waiters_.begin(); it != end;) {
    WaiterPtr w = std::move(it->second);
    w->in_shard_ = false;
    it = waiters_.erase(it);
    if (w->Claim()) {
      try {
        w->fill_status = w->fill();
      } catch (const std::bad_alloc&) {
        w->fill_status = absl::ResourceExhaustedError(
            "the ps ran out of memory filling the pull's response");
      }
      ready->push_back(std::move(w));
    }
  }
}

WaiterPtr VersionWaiters::TakeFirst() {
  while (!waiters_.empty()) {
    WaiterPtr w = std::move(waiters_.begin()->second);
    w->in_shard_ = false;
    waiters_.erase(waiters_.begin());
    if (w->Claim()) return w;
  }
  return nullptr;
}

WaiterTimer::WaiterTimer() : thread_([this] { Loop(); }) {}

WaiterTimer::~WaiterTimer() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    cv_.Signal();
  }
  thread_.join();
}

void WaiterTimer::Add(WaiterPtr waiter, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  VersionWaiter* w = waiter.get();
  w->timer_it_ = timers_.emplace(deadline, std::move(waiter));
  w->in_timer_ = true;
  if (w->timer_it_ == timers_.begin()) cv_.Signal();
}

void WaiterTimer::Remove(VersionWaiter& waiter) {
  absl::MutexLock lock(&mu_);
  if (!waiter.in_timer_) return;
  timers_.erase(waiter.timer_it_);
  waiter.in_timer_ = false;
}

void WaiterTimer::Loop() {
  mu_.Lock();
  while (!stop_) {
    if (!timers_.empty() && timers_.begin()->first <= absl::Now()) {
      // One at a time, with no allocation: this thread must not fail.
      WaiterPtr w = std::move(timers_.begin()->second);
      w->in_timer_ = false;
      timers_.erase(timers_.begin());
      mu_.Unlock();
      if (w->Claim()) {
        // Moved out first: the call finishes the waiter, which drops its closures.
        std::function<void(VersionWaiter&)> on_timeout = std::move(w->on_timeout);
        on_timeout(*w);
      }
      w.reset();
      mu_.Lock();
      continue;
    }
    if (timers_.empty()) {
      cv_.Wait(&mu_);
    } else {
      cv_.WaitWithDeadline(&mu_, timers_.begin()->first);
    }
  }
  mu_.Unlock();
}

}  // namespace shardps
