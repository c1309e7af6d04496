// PushHold: a checkpoint cut that does not drain training (HoldPushesRequest in
// proto/ps.proto). While a hold from step b is in place, the pushes of job steps >= b are kept,
// unapplied, instead of being applied; the chief keeps leasing those steps (their workers pull
// and compute), waits for the steps below b, snapshots every ps, and each ps then applies what
// it held. Steps [0, b) are in the checkpoint and no later one is, and the only wait training
// sees is that of the held pushes, about as long as the snapshot call.
//
// A hold ends at the snapshot made under it (EndSnapshot), at Release (the chief gave the cut
// up, the generation rose, the ps shuts down) or when its deadline passes (a chief that died
// mid-cut). Whatever ended it, the held pushes then run, in the order they came, on the
// hold's own thread, so that neither the snapshot's answer nor the caller of Release waits for
// their updates. A snapshot asked for under a hold that ended any other way is refused: pushes
// of later steps may have been applied by then.
//
// Thread-safety: thread-safe. The held work runs on the hold's thread, never under its lock.
#ifndef SHARDPS_PS_SERVER_PUSH_HOLD_H_
#define SHARDPS_PS_SERVER_PUSH_HOLD_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardps {

class PushHold {
 public:
  explicit PushHold(int task_index);
  // Runs what is still held (as a Release would), then stops the thread.
  ~PushHold();
  PushHold(const PushHold&) = delete;
  PushHold& operator=(const PushHold&) = delete;

  // Holds the pushes of steps >= from_step until `deadline` (or extends the hold from the
  // same step to it). FAILED_PRECONDITION when a hold from another step is in place or a
  // snapshot is being taken under one; INVALID_ARGUMENT for a negative step.
  absl::Status Hold(int64_t from_step, absl::Time deadline);
  // Ends the hold, if any: what it held runs (on the hold's thread). Returns how many pushes
  // were released.
  int64_t Release();

  // Runs `apply` now on the caller's thread, or, when a hold covers `step` (a push of no step
  // is never held), keeps it to run when the hold ends.
  void Admit(std::optional<int64_t> step, std::function<void()> apply);

  // Before a snapshot under the hold from `from_step`: OK when that hold is in place (its
  // deadline then no longer ends it until EndSnapshot); ABORTED naming what ended it
  // otherwise. After OK, the caller takes the snapshot and then calls EndSnapshot, which
  // releases the held pushes whatever the snapshot's outcome.
  absl::Status BeginSnapshot(int64_t from_step);
  void EndSnapshot();

  // Pushes held now (for answers and tests).
  int64_t held() const;

 private:
  void ReleaseLocked(const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Loop();

  const int task_index_;
  mutable absl::Mutex mu_;
  // The step held from; -1: no hold.
  int64_t from_ ABSL_GUARDED_BY(mu_) = -1;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  int64_t deadline_changes_ ABSL_GUARDED_BY(mu_) = 0;
  bool snapshotting_ ABSL_GUARDED_BY(mu_) = false;
  // What ended the last hold other than its snapshot, and the step it held from.
  int64_t ended_from_ ABSL_GUARDED_BY(mu_) = -1;
  const char* ended_why_ ABSL_GUARDED_BY(mu_) = "";
  std::deque<std::function<void()>> held_ ABSL_GUARDED_BY(mu_);
  // Released work waiting for the thread.
  std::deque<std::function<void()>> to_run_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PUSH_HOLD_H_
