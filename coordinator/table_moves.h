// TableMoves: moving a dynamic table's buckets between neighbouring shards of the running job
// (shardctl move-buckets, docs/elastic.md), one request at a time, on the chief's control
// thread, while training goes on. The moves themselves are client/bucket_mover.h's; the
// chief adds the job's side: one move at a time and none during a recovery or a scale, the
// ps' generation, and, for a SYNC job, a drain to a step boundary around each bucket's
// switch (no step is leased past the next sync step until the bucket has switched, which
// takes milliseconds), so that every replica's share of a step is routed by one layout.
//
// Thread-safety: every method REQUIRES the chief's mutex (ChiefState::mu); RunLocked releases
// it while the buckets move.
#ifndef SHARDPS_COORDINATOR_TABLE_MOVES_H_
#define SHARDPS_COORDINATOR_TABLE_MOVES_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/bucket_mover.h"
#include "client/ps_client.h"
#include "coordinator/chief_state.h"
#include "coordinator/recovery.h"
#include "proto/coordinator.pb.h"

namespace shardps {

// A drain to a step boundary, for a change of a table's layout that every replica of a step
// must see alike: no step is leased past the next whole sync step (the next step, ASYNC)
// until EndStepDrainLocked, and this returns once every step before it is done; ABORTED when
// the job stops or a recovery is due meanwhile (the barrier is cleared then).
absl::Status DrainToStepBoundaryLocked(ChiefState* s, Recovery* recovery)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
void EndStepDrainLocked(ChiefState* s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);
// For a SYNC job, makes `options` switch each run of buckets between two sync steps (a drain
// before the switch, its end after it); nothing for other modes. `s` and `recovery` must
// outlive the moves; the hooks take s->mu, which the mover's caller must not hold.
void SwitchAtStepBoundaries(ChiefState* s, Recovery* recovery, BucketMoveOptions* options)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu);

class TableMoves {
 public:
  using Done = std::function<void(absl::StatusOr<MoveTableBucketsResponse>)>;

  // Every pointer must outlive this; `recovery` shares `state`'s mutex.
  TableMoves(ChiefState* state, PsClient* ps, Recovery* recovery);

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(s_->mu) { return s_->mu; }

  // Checks what can be checked without the ps and queues the move for the control thread;
  // `done` runs once it has ended. An error refuses it, and `done` is not run.
  absl::Status RequestLocked(const MoveTableBucketsRequest& request, Done done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  bool pending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) { return queued_.has_value(); }
  bool running() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) { return running_; }
  // Runs the queued move (the control thread, with nothing else under way).
  void RunLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The job stopped: a queued move is answered FAILED_PRECONDITION.
  void FailRequestsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // JobStatus' bucket-move fields.
  void AddToStatusLocked(JobStatus* status) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

 private:
  struct Queued {
    MoveTableBucketsRequest request;
    Done done;
  };
  void Answer(Done done, absl::StatusOr<MoveTableBucketsResponse> outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void RecoveryLockHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu)
      ABSL_ASSERT_EXCLUSIVE_LOCK(recovery_->mu()) {
    s_->mu.AssertHeld();
  }

  ChiefState* const s_;
  PsClient* const ps_;
  Recovery* const recovery_;

  std::optional<Queued> queued_ ABSL_GUARDED_BY(s_->mu);
  bool running_ ABSL_GUARDED_BY(s_->mu) = false;
  int64_t moves_ ABSL_GUARDED_BY(s_->mu) = 0;
  int64_t failed_ ABSL_GUARDED_BY(s_->mu) = 0;
  int64_t buckets_ ABSL_GUARDED_BY(s_->mu) = 0;
  std::optional<MoveTableBucketsResponse> last_ ABSL_GUARDED_BY(s_->mu);
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_TABLE_MOVES_H_
