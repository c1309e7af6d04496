// Shard: one shard of a variable as a ps task holds it: parameters and optimizer slots,
// version (the count of applied updates), the window of recent request ids, the SYNC step in
// progress and the pulls waiting for a version; with a staleness policy (UpdateSpec
// staleness_lr, delay_compensation; ps_server/staleness.h) also its recent updates' rows and
// the parameters of its last versions. It applies updates and answers reads; the store
// (ps_server/shard_store.h) validates requests, finds shards and takes their locks.
//
// Thread-safety: the const accessors may be called from any thread; every other method
// REQUIRES mu() held. References that ShareRange hands out may be dropped on any thread.
#ifndef SHARDPS_PS_SERVER_SHARD_H_
#define SHARDPS_PS_SERVER_SHARD_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "compute/parallel_for.h"
#include "math/optimizer.h"
#include "proto/ps.pb.h"
#include "ps_server/bucket_moves.h"
#include "ps_server/dynamic_table.h"
#include "ps_server/gradient_bytes.h"
#include "ps_server/memory_budget.h"
#include "ps_server/param_blocks.h"
#include "ps_server/recent_request_ids.h"
#include "ps_server/staleness.h"
#include "ps_server/sync_accumulator.h"
#include "ps_server/version_waiters.h"

namespace shardps {

// "shard 'name'", for messages.
std::string QuotedShard(absl::string_view name);

struct RowRange {
  int64_t begin;
  int64_t end;
  int64_t size() const { return end - begin; }
};

// A shard's rows and row width (the product of its shape's dims after the first).
struct Geometry {
  int64_t rows;
  int64_t width;
};

// What an accepted Push or PushRows did.
struct UpdateResult {
  bool duplicate = false;  // SYNC: nothing new (a re-run of the same step and replica)
  bool applied = false;    // an update was applied (SYNC: this push completed the step)
  // SYNC with backup workers: the step had its k replicas without this one; nothing of it was
  // added (applied may still be true: a step whose apply ran out of memory is applied then).
  bool dropped = false;
};

class Shard {
 public:
  // Parameters and optimizer slots, each in copy-on-write blocks of the shard's geometry.
  struct State {
    ParamBlocks params;
    std::vector<ParamBlocks> slots;  // in the optimizer's slot order
  };

  // A snapshot of the shard at one version: for the parameters and then each slot, views of
  // the bytes and references that keep them unchanged while held (an update copies a block
  // that a snapshot holds, and counts its bytes).
  struct Snapshot {
    struct Tensor {
      std::string slot;  // "" for the parameters, else the optimizer's slot name
      std::vector<absl::string_view> pieces;
      std::vector<std::shared_ptr<const void>> holds;
    };
    int64_t version = 0;
    std::vector<Tensor> tensors;
  };

  // Allocates the shard and initializes its parameters from spec.initializer and its slots
  // to the optimizer's initial values. RESOURCE_EXHAUSTED when memory runs out; errors name
  // the shard. Bytes of blocks copied because a snapshot held them are added to
  // `*snapshot_copy_bytes` when given (it must outlive every update of the shard). A dynamic
  // table without max_rows counts its rows in `row_budget` when given (DynamicTableOptions::
  // row_budget; it must outlive the shard's tables).
  // REQUIRES: `spec` validated and `geometry` computed from it.
  static absl::StatusOr<std::shared_ptr<Shard>> Create(
      const ShardSpec& spec, Geometry geometry, int64_t request_id_window,
      std::atomic<int64_t>* snapshot_copy_bytes = nullptr, MemoryBudget* row_budget = nullptr);
  // The bytes a shard of this spec may take (parameters and slots, and at most: a SYNC
  // shard's parameters before its last step, a delay-compensated shard's retained versions
  // and mean squares), or an error naming the shard when the optimizer is invalid.
  static absl::StatusOr<int64_t> BytesFor(const ShardSpec& spec, Geometry geometry);

  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  // A dynamic table's shard (spec.dynamic set; ps_server/dynamic_table.h): rows() is 0, ids
  // are 64-bit keys in the buckets it holds, rows exist once pushed, and only the key calls
  // below and the SYNC rows path apply (the store refuses row ranges).
  bool dynamic() const { return spec_.has_dynamic(); }
  const DynamicTable* table() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return table_.get(); }

  const ShardSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name(); }
  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }
  int64_t size() const { return size_; }  // rows * width floats
  const Optimizer& optimizer() const { return *optimizer_; }
  bool sync() const { return sync_; }
  int num_replicas() const { return num_replicas_; }  // SYNC only
  // SYNC with backup workers: a step is applied with the first replicas_to_aggregate (k <
  // num_replicas) replicas to arrive (UpdateSpec.replicas_to_aggregate).
  bool has_backups() const { return has_backups_; }
  int64_t bytes() const { return bytes_; }            // parameters and slots

  absl::Mutex& mu() const ABSL_LOCK_RETURNED(mu_) { return mu_; }

  int64_t version() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return version_; }
  bool SeenRequest(uint64_t request_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return recent_ids_.Contains(request_id);
  }
  // Makes room to remember one more request id; an update calls it before it changes
  // anything, so that RememberRequest cannot fail after the change (may throw
  // std::bad_alloc).
  void ReserveRequest() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { recent_ids_.Reserve(); }
  void RememberRequest(uint64_t request_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    recent_ids_.Insert(request_id);
  }
  VersionWaiters& waiters() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return waiters_; }

  // A dropped shard (DropShards) is out of the store's map; requests that found it before
  // the drop see this under its lock and answer as for a missing shard.
  bool dropped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return dropped_; }
  void MarkDropped() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { dropped_ = true; }

  // SYNC: some replica has pushed for the step in progress.
  bool step_in_progress() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return accumulator_.in_progress();
  }

  // --- Checkpoints.

  // Dynamic: the shard's rows at the cut, for checkpoint `checkpoint_id`: every row, or,
  // when this shard recorded the cut of checkpoint `base` (> 0) and still has the keys
  // deleted since, only the rows changed since that cut and those keys (Check-N-Run's
  // increment). Records this cut for later increments (the last few). May throw
  // std::bad_alloc (the copies), changing nothing a read can see.
  struct DynamicCut {
    int64_t base_checkpoint = 0;  // 0: every row
    int64_t version = 0;
    BucketRange buckets;          // the range held at the cut
    int64_t routing_version = 0;  // the table's, as this shard knew it at the cut
    std::vector<int64_t> keys;
    std::vector<uint32_t> last_steps;
    // The parameters, then each slot: keys.size() x width floats each.
    std::vector<std::vector<float>> tensors;
    std::vector<int64_t> deleted;
  };
  DynamicCut TakeDynamicCut(int64_t checkpoint_id, int64_t base)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Dynamic: replaces the table (a restore's, built outside the lock) and the version; the
  // step in progress, the request ids and the recorded cuts are forgotten.
  void ReplaceTable(std::unique_ptr<DynamicTable> table, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Dynamic: a fresh, empty table of this shard's options (for a restore to fill).
  absl::StatusOr<std::unique_ptr<DynamicTable>> NewTable() const;

  // Takes references to the parameters and slots at the current version (no copy). May throw
  // std::bad_alloc (the lists of references), changing nothing.
  Snapshot TakeSnapshot() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A fresh state of this shard's geometry, for a restore to fill outside the lock: the
  // parameters uninitialized, the slots at their initial values, or uninitialized too when
  // not `initialize_slots` (a restore that overwrites them: filling them would cost a pass
  // over new memory for nothing). Throws std::bad_alloc.
  State NewState(bool initialize_slots = true) const;
  // Sets `params` (of this shard's geometry) to the shard's initial values.
  absl::Status InitializeParams(ParamBlocks* params) const;
  // Replaces the parameters, slots and version, and starts afresh: the SYNC step in progress
  // and the request-id window are cleared. Waiters stay; the caller releases those the new
  // version reaches. REQUIRES: `state` of this shard's geometry and slots.
  void ReplaceState(State state, int64_t version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Updates. Each either changes the shard as a whole or, when it throws std::bad_alloc
  // (a block copied on write, a buffer for a step), changes nothing that a read can see.
  //
  // An update that would leave a parameter or an optimizer slot NaN or infinite (a finite
  // gradient can overflow them: SGD's p - lr * g near the float range, Adam's g * g) is
  // refused before it writes anything: INVALID_ARGUMENT naming the variable, the shard, the
  // update, the row and the element (Optimizer::FirstNonFiniteDense), the shard unchanged.

  // A push's base version (the version its gradient was computed at; 0: unknown) against
  // the shard: INVALID_ARGUMENT when negative or above the shard's version.
  absl::Status CheckBaseVersion(int64_t base_version) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // ASYNC: applies a dense gradient to `range` now, as one update (the version advances),
  // split over `parallel`'s threads when large. The gradient is read where it lies. With a
  // base version (> 0) the shard's staleness policy applies (ps_server/staleness.h).
  // `grad_max_abs`: the gradient's largest magnitude when the caller knows it (the request
  // check learns it), else negative.
  // REQUIRES: `grad` holds range.size() * width finite floats; CheckBaseVersion passed.
  absl::Status ApplyDense(RowRange range, const GradientBytes& grad, ParallelFor* parallel,
                          int64_t base_version = 0, float grad_max_abs = -1)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ASYNC: applies row gradients now, as one update, with the policy as ApplyDense.
  // REQUIRES: ids unique and in range; grad holds ids.size() * width floats;
  // CheckBaseVersion passed.
  absl::Status ApplyRows(absl::Span<const int64_t> ids, const float* grad,
                         ParallelFor* parallel, int64_t base_version = 0)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Dynamic: ABORTED with ErrorDetail BUCKET_MOVED naming the key, its position, its bucket
  // and the shard when a key's bucket is not in the range the shard holds now (the caller's
  // layout is stale). Lock-free: a bucket move may change the range meanwhile, and the check
  // under the lock (CheckMovedKeys) is the one that counts.
  absl::Status CheckKeys(absl::Span<const int64_t> keys, absl::string_view what) const;
  // Dynamic: the buckets the shard holds now (spec().dynamic()'s range until a bucket move).
  BucketRange buckets() const {
    return {bucket_begin_.load(std::memory_order_acquire),
            bucket_end_.load(std::memory_order_acquire)};
  }
  // Dynamic: the table's routing version as this shard knows it (0: no bucket moved).
  int64_t routing_version() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return moves_->routing_version();
  }
  // Dynamic: a shard added to a table a running job trains (CreateShardsRequest
  // .start_version): it starts at `version` and routing version `routing_version`, as its
  // table's other shards are. REQUIRES: nothing applied to it yet.
  void StartAt(int64_t version, int64_t routing_version) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Dynamic: the buckets a move has staged here and not switched (empty: none).
  BucketRange staged() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return moves_->staged(); }
  // Dynamic: a pull's or a push's keys against bucket moves (ps_server/bucket_moves.h),
  // under the lock: ABORTED with BUCKET_MOVED for a key not held, a push to a frozen bucket,
  // or a push routed by an older routing version.
  // Const for the pulls that call it; a freeze that ran out ends here (BucketMoves::Check).
  absl::Status CheckMovedKeys(absl::Span<const int64_t> keys, bool push, int64_t routing_version,
                              absl::string_view what) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Dynamic: one step of a bucket move (MoveBucketsRequest). A change of the range makes the
  // next checkpoint whole.
  absl::Status MoveBuckets(const MoveBucketsRequest& request, MoveBucketsResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Dynamic: the rows of `keys` at `version` (the current one or, on a SYNC shard, the one
  // before its last step) into out (keys.size() * width floats); a key without a row reads
  // its initial value. FAILED_PRECONDITION when the version is not held.
  absl::Status PullKeys(absl::Span<const int64_t> keys, int64_t version, float* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Dynamic, ASYNC: applies the gradients of `keys` (distinct, held) as one update; rows are
  // made (after admission) by it. REQUIRES: grad holds keys.size() * width finite floats.
  absl::Status ApplyKeys(absl::Span<const int64_t> keys, const float* grad)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // What the staleness policy did so far (zeros without one).
  const StalenessStats& staleness_stats() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return staleness_stats_;
  }
  // Delay compensation's memory now: the bytes of parameter blocks that only retained
  // versions hold, and of the mean squares (DC-ASGD-a). 0 without it.
  int64_t StalenessBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // SYNC: checks that a push belongs to the step in progress: a lower step is stale
  // (ABORTED), a higher one is ahead (FAILED_PRECONDITION).
  absl::Status CheckStep(int64_t step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SYNC: a push for a step below the version belongs to a step this shard has applied.
  // With backup workers it was applied without this push (a straggler's): the push is
  // dropped. Without, every replica's part is in every applied step, so the push is a
  // re-run's, already in: a duplicate, whatever its request id (a re-run routed by a newer
  // layout after a bucket move splits its rows otherwise than its first run did). Either is
  // answered OK, nothing changed, instead of being refused as stale by CheckStep.
  bool AppliedStep(int64_t step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return step >= 0 && step < version_;  // a negative step is refused by CheckStep
  }
  // SYNC: adds a replica's dense chunk or its rows to the step (SyncAccumulator) and, when
  // that completes the step, applies the sum and advances the version. A sum that would make
  // a parameter or slot non-finite (or a dynamic table's new rows that pass the memory
  // budget) refuses the step: the push that completed it fails with that error, the shard
  // stays at its version, and the step stays refused (refused_step()) until a restore.
  // REQUIRES: CheckStep passed, refused_step() OK; replica in [0, num_replicas).
  absl::StatusOr<UpdateResult> AddDense(int replica, RowRange range, const GradientBytes& grad)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<UpdateResult> AddRows(int replica, std::vector<int64_t> ids,
                                       std::vector<float> rows)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // SYNC: OK, or the error that refused the step in progress (AddDense). Every later push
  // for that step, and every pull that waits for a later version, fails with it: the step
  // fails for all its replicas, so the chief counts its attempts and ends the job after its
  // attempt limit instead of leasing the step forever.
  const absl::Status& refused_step() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return refused_step_;
  }

  // Overwrites `range` with `values` (range.size() * width floats); with reset_slots, also
  // returns those rows' slots to their initial values. The version does not change.
  void Assign(RowRange range, const float* values, bool reset_slots)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Reads.

  // The parameters at `version`: the current ones, or, on a SYNC shard one step past it,
  // those before the last step (kept so that a step re-run after a worker died half-way
  // through its pushes computes on exactly the parameters the first run had: another ps may
  // have applied the step meanwhile); null when that version is not held.
  const ParamBlocks* ParamsAt(int64_t version) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Copies the parameters of `range` to `out` (range.size() * width floats).
  void CopyRange(RowRange range, float* out) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends views of the parameters of `range`, in order, and references that keep them
  // unchanged while held (ParamBlocks::Share).
  void ShareRange(RowRange range, std::vector<absl::string_view>* pieces,
                  std::vector<std::shared_ptr<const void>>* holds) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Copies rows `ids` (in range) to `out`, one after another.
  void CopyRows(absl::Span<const int64_t> ids, char* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same three from `params` (ParamsAt's answer).
  void CopyRange(const ParamBlocks& params, RowRange range, float* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ShareRange(const ParamBlocks& params, RowRange range,
                  std::vector<absl::string_view>* pieces,
                  std::vector<std::shared_ptr<const void>>* holds) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CopyRows(const ParamBlocks& params, absl::Span<const int64_t> ids, char* out) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

 private:
  Shard(const ShardSpec& spec, Geometry geometry, std::unique_ptr<Optimizer> optimizer,
        int64_t request_id_window, std::atomic<int64_t>* snapshot_copy_bytes,
        MemoryBudget* row_budget);

  // Where the rows of the parameters and of each slot are, once made writable.
  struct WritableState {
    RowBlocks params;
    std::array<RowBlocks, Optimizer::kMaxSlots> slots;
  };
  // Makes rows [begin, end), or the rows listed, writable in the parameters and every slot
  // (copying the blocks that a pull or a snapshot still holds).
  WritableState MakeWritable(int64_t row_begin, int64_t row_end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  WritableState MakeWritableRows(absl::Span<const int64_t> ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Span<const RowBlocks> SlotSpan(const WritableState& state) const {
    return absl::Span<const RowBlocks>(state.slots.data(), slots_count_);
  }
  // Applies grad[0, n) to elements [first, first + n) of the parameters and slots, block by
  // block, with the learning rate times `lr_scale`. REQUIRES: those rows made writable;
  // `state` from that call.
  void ApplyDenseRun(int64_t step, double lr_scale, int64_t first, const float* grad,
                     int64_t n, const WritableState& state) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // How the staleness policy treats a push based on `base_version` (0: none) to rows
  // [begin, end): its learning-rate scale and the parameters to compensate against (null:
  // none). Counts the push in staleness_stats_.
  struct PushPolicy {
    double lr_scale = 1.0;
    const ParamBlocks* bak = nullptr;
  };
  PushPolicy PolicyFor(int64_t base_version, int64_t begin, int64_t end)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before an ASYNC update writes: keeps the current parameters for delay compensation.
  // After it: records its rows. REQUIRES: the version advanced by exactly one in between.
  void BeforeAsyncUpdate() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AfterAsyncUpdate(int64_t begin, int64_t end) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the update history and retained versions (the parameters were replaced).
  void ForgetHistory() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<UpdateResult> FinishIfComplete(const SyncAccumulator::Result& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SYNC: applies the step's summed gradient once and starts the next step, or refuses it
  // (refused_step_) leaving the shard as it was.
  absl::Status FinishStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The finiteness checks of an update at `step` before it writes: dense over elements
  // [first, first + n) of the parameters (`grad` holds n floats), or rows `ids`.
  absl::Status CheckFiniteDense(int64_t step, double lr_scale, int64_t first,
                                const GradientBytes& grad, int64_t n, ParallelFor* parallel,
                                absl::string_view update) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckFiniteRows(int64_t step, double lr_scale, absl::Span<const int64_t> ids,
                               const float* grad, absl::string_view update) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The dense check as the data path makes it: when the ranges of the shard's values
  // (ranges_, found by one scan after they were forgotten) and the gradient's largest
  // magnitude show that the update cannot overflow (Optimizer::RangesAfter), the ranges after
  // it, without the exact check; else the exact check's error, or nullopt when it passed.
  // The caller sets ranges_ to the result once it has applied the update.
  // `grad_max_abs`: the gradient's largest magnitude, or negative to find it here.
  absl::StatusOr<std::optional<Optimizer::Ranges>> CheckDenseUpdate(
      int64_t step, double lr_scale, int64_t first, const GradientBytes& grad, int64_t n,
      float grad_max_abs, ParallelFor* parallel, absl::string_view update)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The ranges of the parameters' and each slot's values over the whole shard.
  Optimizer::Ranges ScanRanges() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "variable 'v' (shard 'v/part_1')", or "shard 'v'" for an unsplit variable.
  std::string Described() const;
  // The refusal: element `element` of the parameters (row and column), its gradient.
  absl::Status NonFinite(absl::string_view update, int64_t row, int64_t column,
                         float grad) const;
  // Dynamic, SYNC: adds the rows the step's push evicted to prev_keys_ / prev_rows_.
  void KeepEvictedRows(const RowBatch& evicted) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ShardSpec spec_;
  const int64_t rows_;
  const int64_t width_;
  const int64_t size_;
  const std::unique_ptr<const Optimizer> optimizer_;
  const bool sync_;
  const int num_replicas_;
  const StalenessPolicy staleness_;
  const bool has_backups_;
  const int64_t bytes_;
  const size_t slots_count_;
  std::atomic<int64_t>* const snapshot_copy_bytes_;
  MemoryBudget* const row_budget_;  // for a dynamic table without max_rows; may be null

  // Dynamic shards only (else null). Thread-safe itself; the shard's lock orders its updates
  // with the version, the SYNC step and the request ids. Set at creation, replaced only by a
  // restore (ReplaceTable, under the lock; readers hold the lock).
  std::unique_ptr<DynamicTable> table_ ABSL_GUARDED_BY(mu_);
  // Dynamic shards only: bucket moves, and the range they leave (a copy readable without the
  // lock, written under it).
  std::unique_ptr<BucketMoves> moves_ ABSL_GUARDED_BY(mu_);
  std::atomic<int32_t> bucket_begin_{0};
  std::atomic<int32_t> bucket_end_{0};

  mutable absl::Mutex mu_;
  // Dynamic, SYNC: the rows the last step changed or evicted, as they were before it (sorted
  // keys), so that a re-run of the step reads the version before it.
  std::vector<int64_t> prev_keys_ ABSL_GUARDED_BY(mu_);
  std::vector<float> prev_rows_ ABSL_GUARDED_BY(mu_);
  // Dynamic: the table epoch each recent checkpoint's cut closed, by checkpoint id.
  std::map<int64_t, uint32_t> cut_epochs_ ABSL_GUARDED_BY(mu_);
  ParamBlocks params_ ABSL_GUARDED_BY(mu_);
  // SYNC: the parameters before the last step (prev_version_ = version_ - 1), sharing the
  // blocks that step did not change; -1 when none (no step yet, or after an assign or a
  // restore).
  ParamBlocks prev_params_ ABSL_GUARDED_BY(mu_);
  int64_t prev_version_ ABSL_GUARDED_BY(mu_) = -1;
  // One per optimizer slot, with the parameters' geometry (the same rows in the same blocks).
  std::vector<ParamBlocks> slots_ ABSL_GUARDED_BY(mu_);
  // Where the values of params_ and slots_ lie, when known (CheckDenseUpdate). A dense
  // apply sets it; every other write of values (rows, an assignment, a restore) forgets it.
  std::optional<Optimizer::Ranges> ranges_ ABSL_GUARDED_BY(mu_);
  int64_t version_ ABSL_GUARDED_BY(mu_) = 0;
  RecentRequestIds recent_ids_ ABSL_GUARDED_BY(mu_);
  SyncAccumulator accumulator_ ABSL_GUARDED_BY(mu_);
  VersionWaiters waiters_ ABSL_GUARDED_BY(mu_);
  bool dropped_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status refused_step_ ABSL_GUARDED_BY(mu_);  // SYNC: see refused_step()
  // With a staleness policy: the rows of recent updates (to count a push's staleness), the
  // parameters of the last versions (delay compensation's w_bak) and, for DC-ASGD-a, the
  // moving mean square of the gradient per element (size_ floats; empty otherwise).
  UpdateHistory history_ ABSL_GUARDED_BY(mu_);
  RetainedVersions retained_ ABSL_GUARDED_BY(mu_);
  std::vector<float> mean_square_ ABSL_GUARDED_BY(mu_);
  StalenessStats staleness_stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_H_
