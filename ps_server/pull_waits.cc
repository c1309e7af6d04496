#include "ps_server/pull_waits.h"

#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace shardps {

absl::Status PullWaits::FillOrWait(
    std::shared_ptr<Shard> shard, int64_t min_version, int64_t timeout_ms,
    absl::FunctionRef<absl::Status()> fill_now,
    absl::FunctionRef<std::function<absl::Status()>()> make_deferred_fill, DoneCallback* done,
    bool* pending) {
  absl::MutexLock lock(&shard->mu());
  if (shard->dropped()) {
    return shards_->NoSuchShard(absl::StrCat("pull from ", QuotedShard(shard->name())));
  }
  if (shard->version() >= min_version) return fill_now();
  // A refused SYNC step will not be applied: waiting for a version past it is in vain.
  if (!shard->refused_step().ok()) return shard->refused_step();
  if (shutdown_.load(std::memory_order_acquire)) {
    return absl::CancelledError(
        absl::StrCat("pull from ", QuotedShard(shard->name()), ": the ps is shutting down"));
  }
  auto w = std::make_shared<VersionWaiter>();
  w->min_version = min_version;
  w->timeout_ms = timeout_ms;
  w->fill = make_deferred_fill();
  if (timeout_ms > 0) {
    w->on_timeout = [shard](VersionWaiter& waiter) { Expire(*shard, waiter); };
  }
  shard->waiters().Add(w);
  if (timeout_ms > 0) {
    // Lock order: the shard's, then the timer's.
    try {
      timer_.Add(w, absl::Now() + absl::Milliseconds(timeout_ms));
    } catch (const std::bad_alloc&) {
      shard->waiters().Remove(*w);
      throw;
    }
  }
  w->done = std::move(*done);
  *pending = true;
  return absl::OkStatus();
}

void PullWaits::CompleteReady(std::vector<WaiterPtr>* ready) {
  for (const WaiterPtr& w : *ready) {
    timer_.Remove(*w);
    w->Finish(w->fill_status);
  }
  ready->clear();
}

void PullWaits::FailWaiters(Shard& shard, absl::FunctionRef<absl::Status()> error) {
  while (true) {
    WaiterPtr w;
    {
      absl::MutexLock lock(&shard.mu());
      w = shard.waiters().TakeFirst();
    }
    if (w == nullptr) return;
    timer_.Remove(*w);
    w->Finish(error());
  }
}

void PullWaits::CancelWaiters(Shard& shard, absl::string_view why) {
  FailWaiters(shard, [&] {
    return absl::CancelledError(absl::StrCat("pull from ", QuotedShard(shard.name()), ": ", why));
  });
}

void PullWaits::Shutdown() {
  // Set before visiting the shards: a pull that registers under a shard's lock after this
  // shard was visited sees the flag (the store's release/acquire through the lock).
  shutdown_.store(true, std::memory_order_release);
  for (const std::shared_ptr<Shard>& shard : shards_->All()) {
    CancelWaiters(*shard, "the ps is shutting down");
  }
}

void PullWaits::Expire(Shard& shard, VersionWaiter& w) {
  int64_t version;
  {
    absl::MutexLock lock(&shard.mu());
    shard.waiters().Remove(w);
    version = shard.version();
  }
  w.Finish(absl::DeadlineExceededError(
      absl::StrCat("pull from ", QuotedShard(shard.name()), ": version ", version,
                   " did not reach min_version ", w.min_version, " within ", w.timeout_ms, " ms")));
}

}  // namespace shardps
