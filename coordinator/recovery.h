// Recovery: the chief's watch over the ps tasks while a job runs, and the rollback after a ps
// lost the job's state. From PsMonitor's views it holds the job while a ps is unreachable
// (phase kPsUnreachable: its steps would only fail; the ps may come back intact) and notes a
// ps that came back as another incarnation, or that a step or the final checkpoint found
// without the job's shards (StepFailureKind::kPsStateLost). Such a loss is recovered on the
// control thread (RecoverLocked, phase kRecovering): once every ps answers, every ps moves to
// a new generation restored from the newest usable checkpoint, and the step queue restarts
// from that cut. Steps still in flight belong to the old generation: the ps refuse their
// updates and the dispatcher ignores their completions.
//
// Thread-safety: every method REQUIRES the chief's mutex (ChiefState::mu); RecoverLocked
// releases it while it waits for the ps and rolls them back.
#ifndef SHARDPS_COORDINATOR_RECOVERY_H_
#define SHARDPS_COORDINATOR_RECOVERY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "coordinator/chief_state.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/rollback.h"
#include "proto/coordinator.pb.h"

namespace shardps {

class Recovery {
 public:
  // `state`, `monitor` and `ps` must outlive the recovery. Messages name each ps with its
  // address in ChiefState::ps_addresses.
  Recovery(ChiefState* state, PsMonitor* monitor, PsClient* ps);

  // The chief's mutex (ChiefState::mu), which every method REQUIRES.
  absl::Mutex& mu() const ABSL_LOCK_RETURNED(s_->mu) { return s_->mu; }

  // A new job whose ps were, as it started, these incarnations: nothing to recover.
  void StartJobLocked(std::vector<uint64_t> incarnations) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // Ps added to the job (a live scale: ps_scaling.h), as these incarnations, after the others.
  void PsAddedLocked(std::vector<uint64_t> incarnations) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // The job now runs on its first `n` ps (a live scale down: ps_scaling.h).
  void PsRemovedLocked(size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    if (expected_incarnation_.size() > n) expected_incarnation_.resize(n);
  }

  // A rollback is due (a ps lost the job's state), and why.
  bool pending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) { return !cause_.empty(); }
  const std::string& cause() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) { return cause_; }

  // A ps (ps_task; -1: not known which) lost the job's shards: the control thread rolls the
  // job back.
  void PsStateLostLocked(int ps_task, absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The job's ps must roll back to the newest checkpoint, for `cause` (a scale that failed
  // mid-move: ps_scaling.h).
  void RollBackDueLocked(std::string cause) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // A ps could not be reached by a call: the monitor looks at it now.
  void ProbeNow() { monitor_->ProbeNow(); }

  // Holds the job while a ps is unreachable (says which in the phase), releases it when every
  // ps is reachable again and nothing is to be recovered, and notes a ps that restarted.
  void UpdatePsPhaseLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  enum class Result {
    kRecovered,   // every ps is at a new generation; the queue restarts from its cut
    kRetryLater,  // a ps failed during the rollback: try again a little later
    kStopped,     // the job stopped, failed or was interrupted, or the chief is stopping
  };
  // Rolls the job back (REQUIRES: pending()).
  Result RecoverLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // Adds every ps (`views`, from the monitor) to `status`, with its state: "up",
  // "unreachable", or "restarted" ("restoring" while a rollback runs).
  void AddPsToStatusLocked(const std::vector<PsMonitor::PsView>& views, JobStatus* status) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

 private:
  // Whether ps k (as the monitor last saw it up) is another incarnation than the job's. A
  // view from a probe sent before the chief last asked the ps itself (a recovery's Health)
  // may be of the incarnation that recovery replaced: the next probe tells.
  bool RestartedLocked(size_t k, const PsMonitor::PsView& v) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Waits until every ps answers; false when the job stopped meanwhile.
  bool WaitForEveryPsLocked(const std::string& cause, std::vector<PsMonitor::PsView>* views)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // What a rollback did, and the ps's incarnations right after it.
  struct Rolled {
    RollbackOutcome outcome;
    std::vector<uint64_t> incarnations;
    absl::Time health_sent;  // when the Health calls that told them were sent
  };
  // Rolls every ps back into `generation`, releasing the mutex meanwhile. False (the phase
  // says why) to retry later.
  bool RollBackLocked(const std::string& cause, int64_t generation, Rolled* rolled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The job continues from the rollback's cut in `generation`, and it is recorded.
  Result ApplyLocked(const std::string& cause, absl::Time t0, int64_t generation,
                     int64_t done_before, const Rolled& rolled)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // "ps k (address)".
  std::string PsName(size_t k) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  ChiefState* const s_;
  PsMonitor* const monitor_;
  PsClient* const ps_;

  std::string cause_ ABSL_GUARDED_BY(s_->mu);  // non-empty: a rollback is due
  // Each ps's incarnation as the job last reached it (at its start, or its last rollback).
  std::vector<uint64_t> expected_incarnation_ ABSL_GUARDED_BY(s_->mu);
  // When the Health calls that expected_incarnation_ came from (a recovery's) were sent: a
  // monitor view from an earlier probe says nothing about them.
  absl::Time incarnations_checked_at_ ABSL_GUARDED_BY(s_->mu) = absl::InfinitePast();
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_RECOVERY_H_
