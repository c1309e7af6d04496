// PsScaling: moving a running job onto another number of ps tasks (shardctl scale-ps,
// docs/elastic.md), one scale at a time, on the chief's control thread. A scale is a planned
// rollback with a new layout:
//   1. the new ps set is reached and asked its health while training goes on (a ps that does
//      not answer within the request's timeout, or whose memory cannot hold the job's
//      shards, refuses the scale: nothing moved);
//   2. the steps drain to a checkpoint cut (CheckpointDriver::TakeForScaleLocked), and the job
//      stays held (phase kScaling) from the cut on;
//   3. the job's journal records the new layout (its ps and version) and a new generation,
//      before any ps moves: a chief killed from here on resumes on the new layout, rolled
//      back to that cut;
//   4. the chief's client switches to the new set; every variable is partitioned with the
//      job's partitioner for the new count and the cut is restored into it (the re-sharded
//      restore: each ps reads the slices it now owns) in the new generation;
//   5. removed ps (a scale down removes the highest indices, as a StatefulSet does) drop the
//      job's shards and are told to shut down (they exit 0);
//   6. the step queue continues from the cut, every worker is started on the job again with
//      the new ps list, and leasing resumes.
// A failure in 4 (a ps killed mid-move) puts the old layout back in the journal and the
// client, and leaves the rest to the recovery (recovery.h), which rolls the old ps back to the
// same cut: the job goes on where it was, on the old ps. A sync job stays bit-identical across
// a scale: the cut is at a step boundary and the restore is exact (for every partitioner).
//
// A live scale (ScalePsRequest.live: shardctl scale-ps N --live) adds ps without a checkpoint,
// for a job whose dynamic tables outgrow their ps: the new ps are reached as above; the job
// drains to a step boundary; each dynamic table gets an empty shard on each new ps, at the
// version and routing version of its other shards (CreateShardsRequest.start_version); the
// journal records the new ps set; the chief's client switches to it and every worker is
// started again on the new ps list; leasing resumes (the pause is the drain and those calls);
// then each table's buckets are balanced onto the new shards while training goes on
// (client/bucket_mover.h BalanceTableBuckets; a SYNC job switches at step boundaries). Dense
// variables stay where they are. Nothing of the running job changes before the switch: a
// failure up to there drops the new shards and leaves the job as it was. The journal records
// dense_ps (the ps the dense variables are on), which a rollback and a restarted chief keep.
// A live scale down (RemoveLiveLocked) removes ps added so: the reverse, its moves first.
//
// Thread-safety: every method REQUIRES the chief's mutex (ChiefState::mu); RunLocked releases
// it while it waits for the ps and the disk.
#ifndef SHARDPS_COORDINATOR_PS_SCALING_H_
#define SHARDPS_COORDINATOR_PS_SCALING_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/bucket_mover.h"
#include "client/switchable_ps_client.h"
#include "coordinator/checkpointing.h"
#include "coordinator/chief_state.h"
#include "coordinator/dispatcher.h"
#include "coordinator/ps_monitor.h"
#include "coordinator/recovery.h"
#include "proto/coordinator.pb.h"

namespace shardps {

class PsScaling {
 public:
  using Done = std::function<void(absl::StatusOr<ScalePsResponse>)>;
  // A client of the ps at these addresses, in task order.
  using ConnectPs = std::function<absl::StatusOr<std::shared_ptr<PsClient>>(
      const std::vector<std::string>& addresses)>;
  struct Options {
    ConnectPs connect_ps;  // unset: every scale is refused (UNIMPLEMENTED)
    // The chief's TF_CONFIG ps job: the addresses of a scale that names none.
    std::vector<std::string> cluster_ps;
    absl::Duration default_timeout = absl::Seconds(60);
  };

  // Every pointer must outlive the scaling; they share `state`'s mutex.
  PsScaling(ChiefState* state, SwitchablePsClient* ps, PsMonitor* monitor, Recovery* recovery,
            CheckpointDriver* checkpoints, Dispatcher* dispatcher, Options options);

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(s_->mu) { return s_->mu; }

  // Checks what can be checked without the ps (ScalePsRequest's refusals), and queues the
  // scale for the control thread; `done` runs once it has ended. An error refuses it, and
  // `done` is not run.
  absl::Status RequestLocked(const ScalePsRequest& request, Done done)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // A scale is queued.
  bool pending() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) { return queued_.has_value(); }
  // Runs the queued scale (the control thread, with nothing else under way).
  void RunLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The job stopped: a queued scale is answered FAILED_PRECONDITION (releasing the mutex
  // while its callback runs).
  void FailRequestsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // JobStatus' scale fields.
  void AddToStatusLocked(JobStatus* status) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

 private:
  struct Queued {
    ScalePsRequest request;
    std::vector<std::string> to;  // the new ps set
    Done done;
    absl::Time asked;
  };
  // The new ps, answering, with room for the job: their client; else why not (nothing moved).
  absl::StatusOr<std::shared_ptr<PsClient>> ReachLocked(const Queued& q)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Steps 3 to 6 from the scale's cut (`cut`): the response, or the error after which the
  // old layout is back (and a recovery due).
  absl::StatusOr<ScalePsResponse> MoveLocked(const Queued& q, std::shared_ptr<PsClient> to,
                                             const CheckpointInfo& cut, absl::Time paused)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // A live scale (ScalePsRequest.live) onto `to` (the new ps reached): the response, or the
  // error after which the job runs on as before (or, when the failure came after the switch,
  // with a recovery due).
  absl::StatusOr<ScalePsResponse> AddLiveLocked(const Queued& q, std::shared_ptr<PsClient> to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // A live scale down onto `to` (the first ps of the job's, reached): every bucket of the
  // removed ps' table shards moves onto the shards before them while the job trains; at a
  // step boundary the journal records the remaining ps, the clients switch, the workers start
  // again; the removed ps drop the job's shards and exit; the tables are balanced again.
  // REQUIRES: the removed ps hold no dense variable (dense_ps).
  absl::StatusOr<ScalePsResponse> RemoveLiveLocked(const Queued& q, std::shared_ptr<PsClient> to)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The bucket moves of a live scale (ScalePsRequest's per_switch and pause; a SYNC job
  // switches at step boundaries).
  BucketMoveOptions MoveOptionsLocked(const ScalePsRequest& request)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Each of `tables` balanced (BalanceTableBuckets), adding what moved to `response`;
  // ABORTED naming the table whose balance failed.
  absl::Status BalanceLocked(const Queued& q, const std::vector<std::string>& tables,
                             ScalePsResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The journal's layout (with s_->dense_ps) and generation, as the scale moves.
  void RecordLayoutLocked(const std::vector<std::string>& ps, int64_t version,
                          int64_t generation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Drops this job's shards on `addresses` and, with `shutdown`, tells them to exit (best
  // effort: they may be gone), releasing the mutex meanwhile.
  void RetireLocked(const std::vector<std::string>& addresses, bool shutdown,
                    const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void Answer(Done done, absl::StatusOr<ScalePsResponse> outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The parts share s_->mu: says so to the thread-safety analysis.
  void PartsLockHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu)
      ABSL_ASSERT_EXCLUSIVE_LOCK(recovery_->mu(), checkpoints_->mu(), dispatcher_->mu()) {
    s_->mu.AssertHeld();
  }

  ChiefState* const s_;
  SwitchablePsClient* const ps_;
  PsMonitor* const monitor_;
  Recovery* const recovery_;
  CheckpointDriver* const checkpoints_;
  Dispatcher* const dispatcher_;
  const Options options_;

  std::optional<Queued> queued_ ABSL_GUARDED_BY(s_->mu);
  bool running_ ABSL_GUARDED_BY(s_->mu) = false;
  size_t running_to_ ABSL_GUARDED_BY(s_->mu) = 0;  // the running scale's ps count
  int64_t scales_ ABSL_GUARDED_BY(s_->mu) = 0;
  int64_t failed_ ABSL_GUARDED_BY(s_->mu) = 0;
  std::optional<ScalePsResponse> last_ ABSL_GUARDED_BY(s_->mu);
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_PS_SCALING_H_
