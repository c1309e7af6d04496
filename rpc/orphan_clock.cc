#include "rpc/orphan_clock.h"

#include <chrono>

namespace shardps {

OrphanClock::OrphanClock(absl::Duration timeout, absl::Duration start)
    : timeout_(timeout), last_ns_(absl::ToInt64Nanoseconds(start)) {}

absl::Duration OrphanClock::MonotonicNow() {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

void OrphanClock::NoteContact(absl::Duration now) {
  last_ns_.store(absl::ToInt64Nanoseconds(now), std::memory_order_relaxed);
  // Written once; a load first keeps the hot path free of a contended write.
  if (!contacted_.load(std::memory_order_relaxed)) {
    contacted_.store(true, std::memory_order_relaxed);
  }
}

bool OrphanClock::contacted() const { return contacted_.load(std::memory_order_relaxed); }

absl::Duration OrphanClock::last_contact() const {
  return absl::Nanoseconds(last_ns_.load(std::memory_order_relaxed));
}

absl::Duration OrphanClock::Deadline() const {
  if (!enabled()) return absl::InfiniteDuration();
  return last_contact() + timeout_;
}

}  // namespace shardps
