// OrphanClock: how long a daemon that follows a chief (ps, worker, evaluator) has gone
// without contact from it. The daemon notes each contact (every RPC from the chief, every
// status the chief answers); once the deadline passes without one, the job is taken to be
// gone for good and the daemon stops (rpc/daemon.h, exit code 6), so that an abandoned
// cluster gives its machines back instead of serving forever.
//
// Times are durations on a monotonic clock (MonotonicNow), never wall time, so that a clock
// step (NTP) neither orphans a daemon nor keeps one alive. Counting starts at `start`: a
// daemon that never hears from a chief is orphaned `timeout` after it started.
//
// Thread-safety: NoteContact and the readers may be called from any thread at once; a
// contact costs one relaxed atomic store (cheap enough for every RPC). Concurrent notes may
// land out of order by the time between them, which is far below any useful timeout.
#ifndef SHARDPS_RPC_ORPHAN_CLOCK_H_
#define SHARDPS_RPC_ORPHAN_CLOCK_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace shardps {

class OrphanClock {
 public:
  // `timeout` <= 0: never orphaned (Deadline() is InfiniteDuration).
  OrphanClock(absl::Duration timeout, absl::Duration start);

  // Time since an arbitrary fixed origin, from a monotonic clock.
  static absl::Duration MonotonicNow();

  void NoteContact(absl::Duration now);

  absl::Duration timeout() const { return timeout_; }
  bool enabled() const { return timeout_ > absl::ZeroDuration(); }
  // Whether any contact was noted since construction.
  bool contacted() const;
  // The last contact, or the start when there was none.
  absl::Duration last_contact() const;
  // last_contact() + timeout, or InfiniteDuration when disabled.
  absl::Duration Deadline() const;
  bool Expired(absl::Duration now) const { return now >= Deadline(); }

 private:
  const absl::Duration timeout_;
  std::atomic<int64_t> last_ns_;
  std::atomic<bool> contacted_{false};
};

}  // namespace shardps

#endif  // SHARDPS_RPC_ORPHAN_CLOCK_H_
