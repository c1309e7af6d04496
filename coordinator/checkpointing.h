// The chief's side of a checkpoint: turning the ps tasks' snapshots into a committed
// checkpoint, on a schedule, and choosing what to restore after a failure. A checkpoint is cut
// at a barrier (coordinator/scheduler.h): once steps [0, b) are done and no later step has
// run, every ps snapshots (PsClient::SnapshotAll) and training resumes as soon as they answer;
// each ps then writes its file on its own, and the chief waits for every file, writes the
// manifest (checkpoint/manifest.h), commits it (CheckpointDir::Commit) and prunes.
//
// Thread-safety: the functions block on the ps and the disk, and are called holding no lock.
// CheckpointDriver's methods REQUIRE the chief's mutex (ChiefState::mu); RunLocked releases
// it while the ps snapshot and write.
#ifndef SHARDPS_COORDINATOR_CHECKPOINTING_H_
#define SHARDPS_COORDINATOR_CHECKPOINTING_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/manifest.h"
#include "client/ps_client.h"
#include "coordinator/chief_state.h"
#include "coordinator/recovery.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"

namespace shardps {

// Everything a manifest records, gathered by the chief.
struct CheckpointContents {
  int64_t checkpoint_id = 0;
  std::string job_id;
  JobSpec job;
  int64_t generation = 0;
  bool final = false;
  int64_t steps_done = 0;  // the cut: steps [0, steps_done) are in, none after
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 0;
  std::vector<VariableLayout> variables;    // every variable of the job, as placed
  std::vector<SnapshotResponse> snapshots;  // per ps task: the shards' versions at the cut
  std::vector<DataFileInfo> files;          // per ps task: the file it wrote
  std::optional<ManifestEval> eval;
};

// The manifest for `contents`. INTERNAL naming the shard when a shard of a variable is not
// in its ps's snapshot or its tensors are not in that ps's file (a ps that lost a shard
// between layout and snapshot): such a checkpoint must not be committed.
absl::StatusOr<Manifest> BuildManifest(const CheckpointContents& contents, double unix_time);

// A cut taken: every ps has snapshotted as checkpoint `id` and writes its file under `path`.
struct CheckpointCut {
  int64_t id = 0;
  std::string path;
  std::vector<SnapshotResponse> snapshots;  // per ps task
};

// The next checkpoint of `dir`: its directory prepared and every ps snapshotted into it at
// `generation` (dynamic tables as increments on checkpoint `incremental_since`; 0: whole),
// under the hold from `held_from_step` when given (PsClient::SnapshotAll).
absl::StatusOr<CheckpointCut> SnapshotEveryPs(PsClient& ps, const CheckpointDir& dir,
                                              int64_t generation, int64_t incremental_since,
                                              std::optional<int64_t> held_from_step = std::nullopt);
// SnapshotEveryPs in two halves: the directory of `dir`'s next checkpoint made (a create and a
// directory fsync: done before the cut, not while training waits at it), then every ps
// snapshotted into it.
absl::StatusOr<CheckpointCut> PrepareCut(const CheckpointDir& dir);
absl::StatusOr<CheckpointCut> SnapshotPrepared(PsClient& ps, CheckpointCut cut, int64_t generation,
                                               int64_t incremental_since,
                                               std::optional<int64_t> held_from_step);

struct CommitOptions {
  int keep = 1;                       // committed checkpoints kept by pruning
  std::optional<int64_t> keep_also;   // and this one (keep_best)
  absl::Time started;                 // when the checkpoint began (its write_seconds)
  double pause_ms = 0;                // how long training stalled for the cut
  std::function<bool()> stopping;     // asked between looks at the files: true gives up
};

// Waits for every ps's file of `cut`, then writes and commits the manifest of `contents`
// (its id, snapshots and files taken from the cut, its variables' layouts from `ps`), and
// prunes `dir` (a failed prune is logged). INTERNAL naming a ps that could not write its
// file; ABORTED with PS_STATE_LOST naming a ps that no longer knows the checkpoint (it
// restarted); CANCELLED when `stopping`; the ps's and the disk's errors otherwise.
absl::StatusOr<CheckpointInfo> CommitCheckpoint(PsClient& ps, const CheckpointDir& dir,
                                                const CheckpointCut& cut,
                                                CheckpointContents contents,
                                                const std::vector<std::string>& variables,
                                                const CommitOptions& options);

// Runs the checkpoint protocol for the current job on the chief's control thread: says when a
// checkpoint is due, holds the job at the barrier (phase kCheckpointCut), and records the
// outcome (the committed checkpoint in the job's status, or the error). The final checkpoint
// ends training (kTrainingDone), unless a ps lost its state or cannot be reached: the job is
// then rolled back or paused, and the final checkpoint is taken again. Any other failure of
// the final checkpoint (a full disk, a read-only mount) does not end the job either: the ps
// keep the trained state, and the final checkpoint is taken again with a backoff (1 s
// doubling to kFinalRetryMax) until it commits or an operator cancels the job; the job's
// checkpoint_error says so meanwhile.
class CheckpointDriver {
 public:
  using Done = std::function<void(absl::StatusOr<CheckpointInfo>)>;

  // `state`, `recovery` and `ps` must outlive the driver.
  CheckpointDriver(ChiefState* state, Recovery* recovery, PsClient* ps);

  // The chief's mutex (ChiefState::mu), which the methods REQUIRE.
  absl::Mutex& mu() const ABSL_LOCK_RETURNED(s_->mu) { return s_->mu; }

  // A new job (or one rolled back, RolledBackLocked): the next checkpoint is due a whole
  // schedule after its current step, and is whole.
  void StartJobLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void RolledBackLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // A checkpoint asked for now; `done` runs once it is committed or failed, or when the job
  // stops first (FailRequestsLocked). An interrupt's is taken before any other.
  void RequestLocked(Done done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  void RequestInterruptLocked(Done done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Answers every request with FAILED_PRECONDITION (the job is not running), releasing the
  // mutex while the callbacks run.
  void FailRequestsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // Why a checkpoint is due now ("interrupted", "on demand", "final", "every_steps",
  // "every_seconds"), or null. REQUIRES: the job runs, its phase kTraining or kTrainingDone.
  const char* DueLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Takes the checkpoint DueLocked gave `why` for, and records its outcome.
  void RunLocked(const std::string& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // A scale's checkpoint (ps_scaling.h): a drained cut (no step at or past its barrier is
  // leased), after which the job stays held: once every ps has snapshotted, the phase moves
  // from the cut to kScaling (`detail`) with the barrier kept, and the caller ends both
  // (Scheduler::ClearBarrier, ReleasePhaseLocked(kScaling)) whatever the outcome of the
  // commit. An error before the snapshot (the cut abandoned) leaves the job training.
  absl::StatusOr<CheckpointInfo> TakeForScaleLocked(const std::string& detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

 private:
  struct Request {
    std::string why;  // "interrupted" or "on demand"
    Done done;
  };
  // What the checkpoint of a cut at `barrier` records, gathered under the mutex.
  struct Plan {
    CheckpointContents contents;
    std::optional<CheckpointDir> dir;  // the store's (set)
    std::vector<std::string> variables;
    int keep = 1;
    std::optional<int64_t> best;
    int64_t incremental_since = 0;
  };

  // Cuts, snapshots and commits a checkpoint. Holds the mutex except while it waits on the
  // ps and the disk.
  // `scale_detail`: a scale's (TakeForScaleLocked); null for any other.
  absl::StatusOr<CheckpointInfo> TakeLocked(bool final, const std::string* scale_detail = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // A cut's barrier, and whether the ps hold the pushes of the steps at or above it.
  struct Cut {
    int64_t barrier = 0;
    bool held = false;
  };
  // Sets the barrier b and waits until every step below it is done. Unless final, every ps
  // first holds the pushes of steps >= b (HoldPushesAll) and leasing goes on: the workers
  // keep pulling and computing, and only their pushes of those steps wait, until the
  // snapshot. Without progress below b for kHoldPatience (every worker waiting on a held push
  // while a re-queued step below b needs one), the ps release and the cut drains instead: no
  // step leased past a new barrier until the steps below it are done. ABORTED when the cut is
  // abandoned (a rollback due, a ps unreachable, the job stopped).
  // `drain`: drain whatever the job's checkpoint.cut says.
  absl::StatusOr<Cut> CutLocked(bool final, bool drain) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // CutLocked's hold: asks every ps (releasing the mutex meanwhile); false when one refused.
  bool HoldLocked(int64_t barrier) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Releases every ps's hold (best effort: a ps that misses it lets go at the timeout).
  void ReleaseHoldLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // A held cut that turns into a drain (its hold released): a new barrier past every step
  // leased so far, which is not leased past until the steps below it are done.
  void DrainLocked(Cut* at) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  Plan PlanLocked(bool final, int64_t barrier) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // Records the outcome of a checkpoint taken for `why` in the job's status and log.
  void RecordLocked(const std::string& why, const absl::StatusOr<CheckpointInfo>& info)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);
  // The final checkpoint's outcome: whether training is over.
  bool FinalDoneLocked(const absl::StatusOr<CheckpointInfo>& info)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu);

  // The recovery shares the chief's mutex: says so to the thread-safety analysis, which
  // cannot see that both were given the same ChiefState.
  void RecoveryLockHeld() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu)
      ABSL_ASSERT_EXCLUSIVE_LOCK(recovery_->mu()) {
    s_->mu.AssertHeld();
  }

  ChiefState* const s_;
  Recovery* const recovery_;
  PsClient* const ps_;

  std::vector<Request> requests_ ABSL_GUARDED_BY(s_->mu);
  int64_t last_checkpoint_steps_ ABSL_GUARDED_BY(s_->mu) = 0;
  absl::Time last_checkpoint_time_ ABSL_GUARDED_BY(s_->mu);
  // A final checkpoint that failed is taken again no sooner than this.
  absl::Time final_retry_at_ ABSL_GUARDED_BY(s_->mu) = absl::InfinitePast();
  // Final checkpoints failed in a row on the disk (or another cause than a ps): its backoff.
  int final_failures_ ABSL_GUARDED_BY(s_->mu) = 0;
  // Incremental checkpoints of dynamic tables: the committed checkpoint of this generation
  // the next one may be an increment on (0: none; the next is whole), and how many
  // increments are chained on the last whole one.
  int64_t incremental_base_ ABSL_GUARDED_BY(s_->mu) = 0;
  int increments_ ABSL_GUARDED_BY(s_->mu) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHECKPOINTING_H_
