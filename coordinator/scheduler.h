// Scheduler: the chief's step queue. Pure bookkeeping, no I/O and no clock of its own (times
// are passed in). Step s, one batch on one worker, reads global batch s (epoch
// s / steps_per_epoch, batch s % steps_per_epoch). It guarantees:
// - a step is leased only when the parameter version it needs (Plan) is known to be reached,
//   so a worker never waits on the ps for a step that cannot finish: a re-queued step of a
//   failed worker is never stuck behind steps that wait for it;
// - a leased step that fails, or whose lease expires, goes back to the front of the queue;
// - a step is counted done exactly once: later completions are duplicates, ignored.
//
// Thread-safety: not thread-safe; the chief guards it with its own mutex.
#ifndef SHARDPS_COORDINATOR_SCHEDULER_H_
#define SHARDPS_COORDINATOR_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardps {

struct StepTask {
  int64_t step_id = 0;
  int32_t epoch = 0;
  int64_t batch_index = 0;
  int64_t min_version = 0;
  bool sync = false;
  int64_t sync_step = 0;
  int32_t replica = 0;
};

class Scheduler {
 public:
  enum class Mode { kAsync, kSync, kStale };
  // The parameter version a step needs:
  // - ASYNC: none; any ready step may run at once.
  // - SYNC with R replicas: steps g*R .. g*R+R-1 form sync step g, whose gradients the ps
  //   sums and applies once, so each needs version g. The total is rounded up to a multiple
  //   of R. With backup workers (replicas_to_aggregate k < R) sync step g is done once k of
  //   its steps are; the others are superseded, counted done without running or while a
  //   straggler still runs them (their leases stay until the calls return or expire, so a
  //   straggler that hangs is still noticed).
  // - STALE with bound k: step s needs version s - k.
  struct Plan {
    Mode mode = Mode::kAsync;
    int num_replicas = 1;   // SYNC
    // SYNC: steps of a sync step that make it done (k); 0 or num_replicas: all of them.
    int replicas_to_aggregate = 0;
    int staleness = 0;      // STALE
    int64_t steps_per_epoch = 1;
    int64_t total_steps = 0;
  };

  static absl::StatusOr<Scheduler> Create(const Plan& plan);

  // The next step for `worker`, leased until `deadline`; nullopt when no step is ready. A
  // worker may hold several leases (the chief's steps_in_flight), each its own.
  std::optional<StepTask> Lease(int worker, absl::Time deadline);

  // Returns true if this completion counts (the first for this step), false for a duplicate or
  // a step that is not leased to `worker` any more. With backup workers, the completion that
  // makes k of its sync step done also makes the sync step's other steps done (appended to
  // `superseded` when given, lowest first); a later completion of one of them is a duplicate.
  bool Complete(int64_t step_id, int worker, std::vector<int64_t>* superseded = nullptr);

  // The step goes back to the queue (front), unless it completed meanwhile.
  void Requeue(int64_t step_id, int worker);

  // Every step leased to `worker` goes back to the queue (those completed meanwhile do not);
  // returns them, lowest first.
  std::vector<int64_t> RequeueWorker(int worker);

  // Steps whose lease expired before `now`: they are re-queued and returned, with their
  // workers, so that the chief can mark those workers failed.
  std::vector<std::pair<int64_t, int>> ExpireLeases(absl::Time now);

  // The earliest deadline of a lease held now; InfiniteFuture when none is.
  absl::Time NextLeaseDeadline() const;

  // Adds steps (rounded up to whole sync steps). Returns the new total.
  int64_t AddSteps(int64_t steps);

  // The lowest step id never leased: every step below it has been leased at least once.
  int64_t NextNew() const { return next_new_; }
  // `steps` rounded up to a whole number of sync steps (itself outside SYNC mode).
  int64_t RoundUp(int64_t steps) const;
  // Steps >= barrier are not leased until ClearBarrier (re-queued ones below it still are).
  // A checkpoint's cut: with barrier b = RoundUp(NextNew()) no step >= b was ever leased, so
  // once DonePrefix() >= b steps [0, b) are wholly applied and no later step anywhere.
  void SetBarrier(int64_t barrier) { barrier_ = barrier; }
  void ClearBarrier() { barrier_ = -1; }
  // Steps 0 .. DonePrefix()-1 are all done.
  int64_t DonePrefix() const { return done_prefix_; }

  // Resets the queue to a cut (a rollback to a checkpoint), or to a cut plus the steps known
  // done after it (a chief that resumes from live ps state and its journal): steps
  // [0, done_prefix) and `also_done` are done (with backup workers, so is every step of a
  // sync step of which `also_done` holds k), every lease is forgotten (completions of calls
  // still in flight then count only if the chief passes them on, which it does not across a
  // rollback), nothing is re-queued, the barrier is cleared, and the total becomes
  // `total_steps` (rounded up). INVALID_ARGUMENT when done_prefix or an id is outside
  // [0, total].
  absl::Status Restore(int64_t done_prefix, const std::vector<int64_t>& also_done,
                       int64_t total_steps);
  // Drops every step not yet leased; leased ones may still complete.
  void Cancel();

  int64_t total_steps() const { return total_steps_; }
  int64_t done_steps() const { return done_prefix_ + static_cast<int64_t>(done_.size()); }
  int64_t requeued() const { return requeued_; }
  int64_t leased() const { return static_cast<int64_t>(leases_.size()); }
  // Steps leased to `worker` now.
  int64_t LeasedTo(int worker) const;
  bool Finished() const { return done_steps() == total_steps_; }
  // Step `step_id` is done (completed, restored as done, or superseded).
  bool IsDone(int64_t step_id) const {
    return step_id < done_prefix_ || done_.count(step_id) > 0;
  }
  // Steps counted done without a completion of their own (backup workers).
  int64_t superseded() const { return superseded_; }
  // Sync steps are applied with fewer gradients than replicas (backup workers).
  bool has_backups() const {
    return plan_.mode == Mode::kSync && plan_.replicas_to_aggregate > 0 &&
           plan_.replicas_to_aggregate < plan_.num_replicas;
  }
  // Parameter version known to be reached: sync steps (SYNC) or steps (otherwise) of the
  // longest fully completed prefix of steps.
  int64_t KnownVersion() const;
  const Plan& plan() const { return plan_; }

 private:
  explicit Scheduler(const Plan& plan);
  StepTask MakeTask(int64_t step_id) const;
  // Marks `step_id` done (REQUIRES: not done, in [0, total)) and advances the done prefix.
  void MarkDone(int64_t step_id);
  // With backup workers: when k steps of `step_id`'s sync step are done, marks the others
  // done too (appending them to `superseded` when given).
  void SupersedeIfAggregated(int64_t step_id, std::vector<int64_t>* superseded);

  Plan plan_;
  int64_t total_steps_ = 0;
  int64_t next_new_ = 0;              // lowest step id never queued
  std::set<int64_t> requeued_steps_;  // re-queued, leased first (lowest id first)
  struct LeaseInfo {
    int worker;
    absl::Time deadline;
  };
  std::map<int64_t, LeaseInfo> leases_;
  // Done steps at or above done_prefix_ (those below it are all done and not kept, so the
  // set stays as small as the out-of-order completions).
  std::set<int64_t> done_;
  int64_t done_prefix_ = 0;  // steps 0 .. done_prefix_-1 are all done
  int64_t barrier_ = -1;     // steps >= barrier_ are not leased; -1: none
  int64_t requeued_ = 0;
  int64_t superseded_ = 0;
  bool cancelled_ = false;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_SCHEDULER_H_
