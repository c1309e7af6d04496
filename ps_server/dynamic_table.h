// DynamicTable: an embedding table keyed by 64-bit (hashed) ids rather than row indices, as a
// ps task holds it. Each row is `dim` floats of parameters plus the optimizer's slots
// (num_slots x dim floats). A push creates the rows it touches (after admission); a pull never
// creates one: a missing key reads as its initial value, which depends only on (initializer
// incl. seed, table name, key), so every ps and every bucket split gives a key the same row.
// The table holds a set of buckets (partitioners/buckets.h: BucketOf); a key in a bucket it
// does not hold is refused (FAILED_PRECONDITION), so a bucket cannot be written in two places.
//
// Thread-safety: all methods are thread-safe. Keys map to stripes by bucket; a push or pull is
// atomic per stripe, not across stripes. A push racing DropBuckets skips the keys of a bucket
// dropped meanwhile (counted in DynamicPushResult::not_held). A push's checks (finiteness,
// the row budget) see the rows before it; pushes that race each other (the shard serializes
// them) may pass the row budget by the rows they create meanwhile.
#ifndef SHARDPS_PS_SERVER_DYNAMIC_TABLE_H_
#define SHARDPS_PS_SERVER_DYNAMIC_TABLE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "math/initializer.h"
#include "math/optimizer.h"
#include "partitioners/buckets.h"
#include "proto/ps.pb.h"
#include "ps_server/memory_budget.h"

namespace shardps {

struct DynamicTableOptions {
  std::string name;  // keys the initial values (with initializer.seed)
  int64_t dim = 0;
  InitializerSpec initializer;  // zeros, constant, random_uniform/normal, truncated_normal
  int32_t num_buckets = kDefaultNumBuckets;
  // Held at creation: all buckets, or the listed ones.
  bool all_buckets = true;
  std::vector<int32_t> buckets;
  int32_t num_stripes = 64;
  // Admission: a key becomes a row on its admit_after-th push (0 or 1: on the first), at
  // most 255; the gradients of the pushes before are dropped. They are counted in a
  // count-min sketch (4 x uint8 saturating counters per stripe, halved as they age), which may
  // over-count, never under-count: a key may be admitted early when it collides with hot
  // keys, never late.
  int32_t admit_after = 0;
  int64_t admission_sketch_bytes = int64_t{4} << 20;
  // Eviction: rows not pushed for ttl_steps steps (0: never) before the newest step their
  // stripe has seen; a stripe sweeps itself every ttl_steps/4 steps, so a row lives between
  // ttl_steps and 1.25 ttl_steps steps untouched. A row budget (0: none): each stripe keeps to
  // its share (max_rows x its held buckets / all held buckets) by evicting its least recently
  // pushed rows (approximately) on the push that takes it over, never a row that push touched;
  // so the table may pass max_rows by one push's rows per stripe and the shares' rounding.
  int64_t ttl_steps = 0;
  int64_t max_rows = 0;
  // Deleted keys kept for incremental checkpoints, at most (over all stripes).
  int64_t max_logged_deletions = int64_t{1} << 22;
  // Memory: when set, each row counts DynamicTable::row_bytes() in this budget while it
  // exists (its parameters, slots, metadata and index entry), so that a table fed new keys
  // cannot grow past the ps' memory (a table with max_rows has its rows reserved up front
  // instead, and leaves this null). A push, import or restore that would make rows past the
  // budget fails with RESOURCE_EXHAUSTED naming the table (budget_name) and changes
  // nothing; pushes of keys that have rows go on. Must outlive the table.
  MemoryBudget* row_budget = nullptr;
  std::string budget_name;  // how budget errors name the table (default "table '<name>'")
};

// Rows in a flat layout: what export, import and checkpoints move.
struct RowBatch {
  std::vector<int64_t> keys;
  std::vector<uint32_t> last_steps;  // the step of each row's last push
  // Per row, (1 + num_slots) * dim floats: the parameters, then each slot.
  std::vector<float> values;
};

struct DynamicPushResult {
  int64_t applied = 0;   // distinct rows updated
  int64_t created = 0;   // of which new
  int64_t denied = 0;    // distinct keys not yet admitted (gradient dropped)
  int64_t not_held = 0;  // distinct keys whose bucket was dropped during the push
};

struct DynamicTableStats {
  int64_t rows = 0;
  int64_t created = 0;
  int64_t evicted_ttl = 0;
  int64_t evicted_budget = 0;
  int64_t admission_denied = 0;  // pushes of keys not yet admitted
  int64_t dropped = 0;           // rows removed by DropBuckets or EraseKeys
  int64_t index_bytes = 0;       // index arrays mapped
  int64_t arena_bytes = 0;       // row chunks mapped
};

class DynamicTable {
 public:
  // INVALID_ARGUMENT (naming the option) for a bad option or initializer.
  static absl::StatusOr<std::unique_ptr<DynamicTable>> Create(const DynamicTableOptions& options,
                                                              const Optimizer& optimizer);
  ~DynamicTable();
  DynamicTable(const DynamicTable&) = delete;
  DynamicTable& operator=(const DynamicTable&) = delete;

  const std::string& name() const { return name_; }
  int64_t dim() const { return dim_; }
  int num_slots() const { return num_slots_; }
  int32_t num_buckets() const { return num_buckets_; }

  // out[k * dim .. (k + 1) * dim) = the parameters of keys[k] (its initial value when it has
  // no row). Creates nothing. INVALID_ARGUMENT when out.size() != keys.size() * dim;
  // FAILED_PRECONDITION naming the key and its bucket when a key's bucket is not held.
  absl::Status Pull(absl::Span<const int64_t> keys, absl::Span<float> out) const;

  // Applies grads (keys.size() x dim) as one update at `step` (>= 1, the shard's update count:
  // Adam's t, and the clock of eviction) with the learning rate scaled by lr_scale > 0.
  // Gradients of a repeated key are summed in order of appearance and each distinct row is
  // updated once (Optimizer::ApplyRowsScaled); a new row's slots start at
  // Optimizer::initial_slot_value.
  // REQUIRES: `optimizer` is the one the table was created with (its num_slots is checked).
  // Bad input (size, non-finite gradient, bucket not held, step, scale) changes nothing and
  // names the key and its position. So does an update that would leave a row's parameter or
  // slot non-finite (INVALID_ARGUMENT naming the key; a new row is checked from its initial
  // value) and, with a row budget, new rows past it (RESOURCE_EXHAUSTED naming the table).
  // `evicted`, when given, gets the rows this push evicts
  // (by ttl or budget), as they were just before they went: a SYNC shard keeps them so that
  // a re-run of the step reads what the step read.
  absl::StatusOr<DynamicPushResult> Push(absl::Span<const int64_t> keys,
                                         absl::Span<const float> grads,
                                         const Optimizer& optimizer, int64_t step,
                                         double lr_scale = 1.0, RowBatch* evicted = nullptr);

  // Evicts, in every stripe, the rows not pushed for ttl_steps before `now_step` (no-op
  // without a ttl). Returns how many.
  int64_t EvictExpired(int64_t now_step);

  // Buckets: moved whole (re-sharding, replication), never rehashed.
  bool HoldsBucket(int32_t bucket) const;
  std::vector<int32_t> HeldBuckets() const;
  // The rows of whole held buckets (FAILED_PRECONDITION naming one not held); with
  // `since_epoch`, only those changed after that epoch (a bucket move's catch-up).
  absl::StatusOr<RowBatch> ExportBuckets(absl::Span<const int32_t> buckets,
                                         uint32_t since_epoch = 0) const;
  // The keys of these buckets deleted after epoch `since` (DeletedSince's, filtered).
  absl::StatusOr<std::vector<int64_t>> DeletedInBuckets(absl::Span<const int32_t> buckets,
                                                        uint32_t since) const;
  // Stamps every row of these held buckets with the current epoch, so that the next
  // incremental checkpoint writes them (buckets that moved in).
  void RestampBuckets(absl::Span<const int32_t> buckets);
  // Takes buckets not held now, with their rows (from ExportBuckets). INVALID_ARGUMENT for a
  // malformed batch or a key outside the buckets (named with its position),
  // FAILED_PRECONDITION for a bucket already held; nothing changes then.
  absl::Status ImportBuckets(absl::Span<const int32_t> buckets, const RowBatch& rows);
  // Gives up held buckets and their rows (logged as deletions). FAILED_PRECONDITION naming a
  // bucket not held; nothing changes then.
  absl::Status DropBuckets(absl::Span<const int32_t> buckets);

  // Incremental checkpoints: every change to a row (push, import, upsert) stamps it with the
  // current epoch (from 1). AdvanceEpoch closes the epoch and returns it; a checkpoint writes
  // the rows changed and the keys deleted since the epoch its predecessor closed (0: a full
  // checkpoint), and a restore applies the deletions first, then the rows.
  uint32_t epoch() const { return epoch_.load(std::memory_order_acquire); }
  uint32_t AdvanceEpoch() { return epoch_.fetch_add(1, std::memory_order_acq_rel); }
  // Calls `sink` with the rows changed after epoch `since` (0: every row), a stripe at a time
  // (the stripe's lock is not held during the call, so the extra memory is one stripe's
  // rows). Stops at and returns the first error of `sink`.
  absl::Status ForEachChangedBatch(uint32_t since,
                                   const std::function<absl::Status(const RowBatch&)>& sink) const;
  // The rows changed after epoch `since`, counted (a sizing pass: it reads only each row's
  // epoch), and visited one by one in place: `visit(key, last_step, values)` with values[0]
  // the parameters and values[1 + j] slot j (dim floats each), valid during the call only,
  // under the row's stripe lock (so `visit` must not call back into the table). A checkpoint
  // cut copies the rows straight into its own buffers this way.
  int64_t CountChanged(uint32_t since) const;
  void ForEachChangedRow(
      uint32_t since,
      const std::function<void(int64_t, uint32_t, const float* const*)>& visit) const;
  // Keys deleted (eviction, DropBuckets, EraseKeys) after epoch `since`, in no particular
  // order (a key may repeat). FAILED_PRECONDITION when the log has dropped deletions of a later
  // epoch (it keeps at most max_logged_deletions): take a full checkpoint.
  absl::StatusOr<std::vector<int64_t>> DeletedSince(uint32_t since) const;
  void ForgetDeletionsThrough(uint32_t epoch);
  // Restore: writes rows (created or overwritten, stamped with the current epoch) and erases
  // keys. Keys must be in held buckets; INVALID_ARGUMENT for a malformed batch.
  absl::Status UpsertRows(const RowBatch& rows);
  absl::Status EraseKeys(absl::Span<const int64_t> keys);

  DynamicTableStats stats() const;
  int64_t size() const { return total_rows_.load(std::memory_order_relaxed); }
  // What a row counts in the row budget: (1 + num_slots) * dim floats, its step and epoch
  // stamps and its index entry (12 bytes at a load of 0.5 to 0.85).
  int64_t row_bytes() const { return row_bytes_; }

 private:
  struct Stripe;
  struct KeyPlace {
    int32_t stripe;
    int32_t bucket;
  };

  DynamicTable(const DynamicTableOptions& options, KeyedRowInitializer initializer,
               const Optimizer& optimizer);

  int64_t row_floats() const { return dim_ * (1 + num_slots_); }
  int32_t StripeOfBucket(int32_t bucket) const;
  absl::Status CheckHeld(absl::Span<const int64_t> keys, std::vector<KeyPlace>* places) const;
  absl::Status CheckBatch(const RowBatch& rows) const;
  // Push's arguments: sizes, slots, step, scale, finite gradients.
  absl::Status CheckPush(absl::Span<const int64_t> keys, absl::Span<const float> grads,
                         const Optimizer& optimizer, int64_t step, double lr_scale) const;
  // Push's finiteness check of its distinct keys (keys[first[u]], gradient sums[u * dim]),
  // grouped by stripe (order, begin): the update must leave every row finite.
  absl::Status CheckFiniteUpdate(absl::Span<const int64_t> keys,
                                 const std::vector<uint32_t>& first,
                                 const std::vector<float>& sums,
                                 const std::vector<uint32_t>& order,
                                 const std::vector<uint32_t>& begin, const Optimizer& optimizer,
                                 int64_t step, double lr_scale) const;
  // Row budget (no-ops without one). Reserves room for up to `candidates` new rows, or, when
  // that does not fit, for the `count_missing()` there are exactly: RESOURCE_EXHAUSTED naming
  // the table when even that does not fit, nothing reserved.
  absl::Status ChargeNewRows(int64_t candidates, const std::function<int64_t()>& count_missing,
                             absl::string_view doing);
  // Squares the reservation with the rows there are now (after rows were made or removed).
  void SettleCharge();
  // Stripe helpers: each REQUIRES the stripe's lock held exclusively (CopyRow: shared) and
  // asserts it, which is what lets the thread-safety analysis check their bodies (Stripe is
  // defined in the .cc, so an annotation here cannot name its mutex).
  uint32_t NewRow(Stripe& s, int64_t key, uint32_t last_step);
  void RemoveRow(Stripe& s, int64_t key, uint32_t row, int64_t* counter);
  // Both append the rows they evict to `evicted` when it is not null.
  int64_t EvictOlderThan(Stripe& s, uint32_t threshold, int64_t limit, int64_t* counter,
                         RowBatch* evicted);
  void EvictForBudget(Stripe& s, uint32_t now, RowBatch* evicted);
  // Push's update of `rows` (its gradients, dim floats each) and their stamps.
  void ApplyToRows(Stripe& s, const std::vector<int64_t>& rows,
                   const std::vector<float>& grad_rows, const Optimizer& optimizer, int64_t step,
                   double lr_scale, uint32_t now);
  // After a push to the stripe at `now`: its ttl sweep, when due, and its row budget.
  void EvictAfterPush(Stripe& s, uint32_t now, RowBatch* evicted);
  bool Admit(Stripe& s, int64_t key);
  void LogDeletion(Stripe& s, int64_t key);
  void CopyRow(const Stripe& s, int64_t key, uint32_t row, RowBatch* out) const;
  void WriteRow(Stripe& s, int64_t key, const float* values, uint32_t last_step);

  const std::string name_;
  const int64_t dim_;
  const int num_slots_;
  const int32_t num_buckets_;
  const int32_t num_stripes_;
  const int32_t admit_after_;
  const int64_t ttl_steps_;
  const int64_t max_rows_;
  const int64_t max_deletions_per_stripe_;
  const uint64_t sketch_width_;
  const KeyedRowInitializer initializer_;
  float initial_slot_[Optimizer::kMaxSlots] = {};
  MemoryBudget* const row_budget_;
  const std::string budget_name_;
  const int64_t row_bytes_;
  absl::Mutex charge_mu_;
  int64_t charged_rows_ ABSL_GUARDED_BY(charge_mu_) = 0;  // rows reserved in row_budget_

  std::unique_ptr<std::atomic<bool>[]> held_;  // per bucket; written under its stripe's lock
  std::unique_ptr<Stripe[]> stripes_;
  std::atomic<int64_t> total_rows_{0};
  std::atomic<int32_t> total_held_{0};  // buckets held
  std::atomic<uint32_t> epoch_{1};
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_DYNAMIC_TABLE_H_
