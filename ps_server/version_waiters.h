// Pulls that wait for a shard to reach a version (PullRequest.min_version), without holding
// a thread: the update that reaches the version completes them, or the one timer thread of
// the store when their wait times out, or Shutdown / DropShards.
//
// A VersionWaiter is completed exactly once, by whoever wins Claim(): the winner removes it
// from the lists it is still in and calls Finish() holding no lock. VersionWaiters is one
// shard's list, by min_version; WaiterTimer is the store's list, by deadline, with the
// thread that expires them.
//
// Thread-safety: VersionWaiters is not thread-safe (the shard's mutex guards it, and the
// waiters' shard-side bookkeeping). WaiterTimer is thread-safe. Lock order: a shard's mutex,
// then the timer's; the timer never holds its own while it calls out.
#ifndef SHARDPS_PS_SERVER_VERSION_WAITERS_H_
#define SHARDPS_PS_SERVER_VERSION_WAITERS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardps {

struct VersionWaiter {
  int64_t min_version = 0;
  int64_t timeout_ms = 0;
  // Fills the pull's response from the shard. REQUIRES: the shard's mutex held.
  std::function<absl::Status()> fill;
  // The pull's completion, called once by Finish().
  std::function<void(const absl::Status&)> done;
  // Called by the timer, on its thread and holding no lock, once it has won Claim() for
  // this waiter: removes it from its shard and finishes it with DEADLINE_EXCEEDED.
  std::function<void(VersionWaiter&)> on_timeout;
  // What TakeReady's fill() came to: OK, or RESOURCE_EXHAUSTED when it ran out of memory.
  // The one who finishes a ready waiter passes this on.
  absl::Status fill_status;

  // True for exactly one caller.
  bool Claim() { return !claimed_.exchange(true, std::memory_order_acq_rel); }
  // Calls `done` and drops the closures (they may hold the shard). REQUIRES: the caller won
  // Claim() and holds no store or shard lock.
  void Finish(const absl::Status& status);

 private:
  friend class VersionWaiters;
  friend class WaiterTimer;
  std::atomic<bool> claimed_{false};
  // Guarded by the shard's mutex.
  bool in_shard_ = false;
  std::multimap<int64_t, std::shared_ptr<VersionWaiter>>::iterator shard_it_;
  // Guarded by the timer's mutex.
  bool in_timer_ = false;
  std::multimap<absl::Time, std::shared_ptr<VersionWaiter>>::iterator timer_it_;
};

using WaiterPtr = std::shared_ptr<VersionWaiter>;

// One shard's waiters, by min_version.
class VersionWaiters {
 public:
  // May throw std::bad_alloc, having added nothing.
  void Add(WaiterPtr waiter);
  // Removes `waiter` if it is still in the list.
  void Remove(VersionWaiter& waiter);
  // Removes the waiters whose min_version is at most `version`, and for each that this call
  // claims, calls fill() (so it sees exactly this version) and appends it to `ready`: the
  // caller then finishes them with their fill_status, after RemoveTimer, holding no lock.
  // May throw std::bad_alloc (growing `ready`) before it changes anything.
  void TakeReady(int64_t version, std::vector<WaiterPtr>* ready);
  // Removes waiters until one that this call claims (the timer may have claimed others),
  // and returns it; nullptr once the list is empty. Allocates nothing: Shutdown and
  // DropShards cancel every waiter whatever the memory left.
  WaiterPtr TakeFirst();
  // How many waiters a TakeReady(version) would take (to reserve room before an update).
  size_t CountReady(int64_t version) const;
  bool empty() const { return waiters_.empty(); }

 private:
  std::multimap<int64_t, WaiterPtr> waiters_;
};

// The store's waiters with a timeout, by deadline, and the thread that expires them.
class WaiterTimer {
 public:
  WaiterTimer();
  // Stops the thread; waiters still listed are dropped without being finished (the store
  // cancels every waiter before it destroys its timer).
  ~WaiterTimer();

  // May throw std::bad_alloc, having added nothing.
  void Add(WaiterPtr waiter, absl::Time deadline);
  // Removes `waiter` if it is still listed (its completion won the race against the timer).
  void Remove(VersionWaiter& waiter);

 private:
  void Loop();

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::multimap<absl::Time, WaiterPtr> timers_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is initialized
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_VERSION_WAITERS_H_
