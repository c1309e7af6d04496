// PullWaits: the store's pulls that wait for a shard to reach a version (PullRequest
// min_version). FillOrWait answers a pull at once or parks it on its shard's waiter list;
// the update that reaches the version completes it (CompleteReady), or the timer thread
// when its wait times out (DEADLINE_EXCEEDED), or FailWaiters (a drop, a new generation,
// Shutdown). Every pull's `done` runs exactly once, holding no store or shard lock.
//
// Thread-safety: thread-safe. Lock order: a shard's lock, then the timer's.
#ifndef SHARDPS_PS_SERVER_PULL_WAITS_H_
#define SHARDPS_PS_SERVER_PULL_WAITS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "ps_server/shard.h"
#include "ps_server/shard_map.h"
#include "ps_server/version_waiters.h"

namespace shardps {

class PullWaits {
 public:
  using DoneCallback = std::function<void(const absl::Status&)>;

  // `shards` (for Shutdown, and messages) must outlive this.
  explicit PullWaits(const ShardMap* shards) : shards_(shards) {}

  // Fills the response now (fill_now, under the shard's lock) when the shard has reached
  // min_version, else registers a waiter whose fill make_deferred_fill() makes, completed
  // later by an update, the timer (timeout_ms > 0), DropShards or Shutdown: then *pending is
  // true and `*done` has been moved into the waiter (the last step, after everything that
  // may throw). NOT_FOUND for a dropped shard; CANCELLED once shut down; the step's error
  // when the shard refused its SYNC step (Shard::refused_step).
  absl::Status FillOrWait(std::shared_ptr<Shard> shard, int64_t min_version, int64_t timeout_ms,
                          absl::FunctionRef<absl::Status()> fill_now,
                          absl::FunctionRef<std::function<absl::Status()>()> make_deferred_fill,
                          DoneCallback* done, bool* pending);

  // Calls each ready waiter's `done` (with its fill status); the waiters were claimed and
  // filled under their shard's lock (VersionWaiters::TakeReady), which the caller no longer
  // holds. Leaves `ready` empty.
  void CompleteReady(std::vector<WaiterPtr>* ready);

  // Fails every pull waiting on `shard` with the status `error()` makes.
  void FailWaiters(Shard& shard, absl::FunctionRef<absl::Status()> error);
  // Fails every pull waiting on `shard` with CANCELLED, saying `why`.
  void CancelWaiters(Shard& shard, absl::string_view why);

  // Fails every waiting pull with CANCELLED, and every later one too. Idempotent.
  void Shutdown();
  bool shutting_down() const { return shutdown_.load(std::memory_order_acquire); }

 private:
  // The timer's half of a waiter that timed out (the timer has claimed it).
  static void Expire(Shard& shard, VersionWaiter& w);

  const ShardMap* const shards_;
  std::atomic<bool> shutdown_{false};
  // Last: its thread is started once every other member is initialized, and stopped first.
  WaiterTimer timer_;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PULL_WAITS_H_
