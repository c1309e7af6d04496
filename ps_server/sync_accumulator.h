// SyncAccumulator: the SYNC step in progress on one shard. Each replica contributes either
// dense pushes (row-range chunks that together cover the shard) or exactly one PushRows; rows
// a replica already sent for the step are not added again (another worker re-running the
// step). Sum() adds the complete replicas' gradients in replica order 0..n-1, whatever the
// order they arrived in, so a run is reproducible bit for bit. With backup workers
// (replicas_to_aggregate k < n, opt-in) the step is complete once k replicas are, and which
// k depends on arrival order (docs/design.md#backup-workers). It only gathers and sums; the
// shard applies the sum with its optimizer.
//
// Thread-safety: not thread-safe; guarded by the shard's mutex.
#ifndef SHARDPS_PS_SERVER_SYNC_ACCUMULATOR_H_
#define SHARDPS_PS_SERVER_SYNC_ACCUMULATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "ps_server/gradient_bytes.h"

namespace shardps {

class SyncAccumulator {
 public:
  struct Result {
    bool duplicate = false;  // added nothing new (a re-run of a replica's part)
    // k < n only: the step already has its k replicas and this one is not among them;
    // nothing was added.
    bool dropped = false;
    // The step has its replicas (all n, or the first k to complete): the caller applies
    // Sum() and then calls Clear().
    bool complete = false;
  };

  // The summed gradient of a complete step.
  struct StepGradient {
    // Every replica sent rows: `ids` are the union of their ids, sorted, and `values` holds
    // ids.size() rows. Otherwise `values` is dense over the whole shard (rows * width).
    bool rows_only = false;
    std::vector<int64_t> ids;
    std::vector<float> values;
  };

  // `replicas_to_aggregate` k: the step is complete once k replicas are; 0 (or
  // num_replicas) means all of them. REQUIRES: 0 <= k <= num_replicas.
  SyncAccumulator(int num_replicas, int replicas_to_aggregate, int64_t rows, int64_t width);

  int num_replicas() const { return static_cast<int>(replicas_.size()); }
  int replicas_to_aggregate() const { return replicas_to_aggregate_; }
  // k < n: the step may leave replicas out (backup workers).
  bool has_backups() const { return replicas_to_aggregate_ < num_replicas(); }

  // Adds the rows of a dense chunk for rows [row_begin, row_end) that `replica` has not sent
  // yet (dropped, adding nothing, when the step is complete without it). A replica's first
  // chunk allocates its dense buffer: that may throw std::bad_alloc, with nothing changed.
  // REQUIRES: 0 <= replica < num_replicas(); 0 <= row_begin < row_end <= rows; `grad` holds
  // (row_end - row_begin) * width floats.
  Result AddDense(int replica, int64_t row_begin, int64_t row_end, const GradientBytes& grad);

  // Records `replica`'s one PushRows for the step: unique ids, their rows (ids.size() *
  // width floats); dropped when the step is complete without it. FAILED_PRECONDITION when
  // the replica already sent dense chunks.
  // REQUIRES: 0 <= replica < num_replicas(); every id in [0, rows).
  absl::StatusOr<Result> AddRows(int replica, std::vector<int64_t> ids,
                                 std::vector<float> rows);

  // Some replica has contributed to the step.
  bool in_progress() const { return touched_replicas_ > 0; }
  bool complete() const { return complete_replicas_ == replicas_to_aggregate_; }
  // Every complete replica sent rows (PushRows), none dense chunks.
  bool rows_only() const;

  // The step's gradient: the complete replicas' gradients summed in replica order, scaled by
  // n / k when k < n (n times their mean, the scale of a full step, so the learning rate means
  // the same; the other replicas' rows, even those partly arrived, are left out). May move
  // buffers out of the accumulator (call Clear() after applying). May throw std::bad_alloc,
  // before changing anything.
  // REQUIRES: complete().
  StepGradient Sum();

  // Forgets the step (frees every buffer).
  void Clear();

 private:
  struct Replica {
    enum class Kind { kNone, kDense, kRows };
    Kind kind = Kind::kNone;
    bool complete = false;
    // kDense: dense over the shard, allocated by the first chunk; covered[r]: row r arrived.
    std::vector<float> dense;
    std::vector<uint8_t> covered;
    int64_t covered_rows = 0;
    // kRows: unique ids in order of first appearance, and their (summed) rows.
    std::vector<int64_t> ids;
    std::vector<float> rows;
  };

  Result CompleteReplica(Replica& replica);
  // k < n: multiplies the sum of k replicas by n / k.
  void ScaleForBackups(std::vector<float>* values) const;

  // A complete step leaves `rep` out (k < n: it was not among the first k).
  bool LeftOut(const Replica& rep) const { return complete() && !rep.complete; }

  const int64_t rows_;
  const int64_t width_;
  std::vector<Replica> replicas_;
  const int replicas_to_aggregate_;
  int complete_replicas_ = 0;
  int touched_replicas_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SYNC_ACCUMULATOR_H_
