#include "ps_server/sync_accumulator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include <Eigen/Core>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

using FloatArray = Eigen::Map<Eigen::ArrayXf>;
using ConstFloatArray = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace

SyncAccumulator::SyncAccumulator(int num_replicas, int replicas_to_aggregate, int64_t rows,
                                 int64_t width)
    : rows_(rows),
      width_(width),
      replicas_(static_cast<size_t>(num_replicas)),
      replicas_to_aggregate_(replicas_to_aggregate > 0 ? replicas_to_aggregate : num_replicas) {}

SyncAccumulator::Result SyncAccumulator::AddDense(int replica, int64_t row_begin,
                                                  int64_t row_end, const GradientBytes& grad) {
  Replica& rep = replicas_[static_cast<size_t>(replica)];
  // A complete replica adds nothing; `complete` still tells whether the step waits to be
  // applied (a retry after an apply that ran out of memory applies it then). So does one that
  // a complete step leaves out.
  if (rep.complete) return {true, false, complete()};
  if (LeftOut(rep)) return {false, true, true};
  if (rep.kind == Replica::Kind::kNone) {
    // Allocate first: a bad_alloc leaves the replica as it was.
    std::vector<float> dense(static_cast<size_t>(rows_ * width_), 0.0f);
    std::vector<uint8_t> covered(static_cast<size_t>(rows_), 0);
    rep.dense = std::move(dense);
    rep.covered = std::move(covered);
    rep.kind = Replica::Kind::kDense;
    ++touched_replicas_;
  }
  int64_t added = 0;
  for (int64_t r = row_begin; r < row_end;) {
    if (rep.covered[static_cast<size_t>(r)]) {
      ++r;
      continue;
    }
    int64_t run_end = r;
    while (run_end < row_end && !rep.covered[static_cast<size_t>(run_end)]) {
      rep.covered[static_cast<size_t>(run_end++)] = 1;
    }
    grad.CopyTo((r - row_begin) * width_, (run_end - row_begin) * width_,
                rep.dense.data() + r * width_);
    added += run_end - r;
    r = run_end;
  }
  if (added == 0) return {true, false, false};
  rep.covered_rows += added;
  if (rep.covered_rows == rows_) return CompleteReplica(rep);
  return {};
}

absl::StatusOr<SyncAccumulator::Result> SyncAccumulator::AddRows(int replica,
                                                                 std::vector<int64_t> ids,
                                                                 std::vector<float> rows) {
  Replica& rep = replicas_[static_cast<size_t>(replica)];
  if (rep.complete) return Result{true, false, complete()};
  if (LeftOut(rep)) return Result{false, true, true};
  if (rep.kind == Replica::Kind::kDense) {
    return absl::FailedPreconditionError(absl::StrCat(
        "replica ", replica, " already pushed dense rows for this step; a replica's step is "
        "either dense pushes or one PushRows"));
  }
  rep.kind = Replica::Kind::kRows;
  rep.ids = std::move(ids);
  rep.rows = std::move(rows);
  ++touched_replicas_;
  return CompleteReplica(rep);
}

SyncAccumulator::Result SyncAccumulator::CompleteReplica(Replica& rep) {
  rep.complete = true;
  ++complete_replicas_;
  return {false, false, complete()};
}

bool SyncAccumulator::rows_only() const {
  return std::all_of(replicas_.begin(), replicas_.end(), [](const Replica& r) {
    return !r.complete || r.kind == Replica::Kind::kRows;
  });
}

SyncAccumulator::StepGradient SyncAccumulator::Sum() {
  // Only complete replicas count: with k < n the others (absent, or partly arrived) are left
  // out. With k = n every replica is complete, and the sum is the same as ever, bit for bit.
  StepGradient sum;
  if (rows_only()) {
    // Sparse: the union of the rows, sorted, each summed in replica order. Reads only.
    sum.rows_only = true;
    for (const Replica& r : replicas_) {
      if (r.complete) sum.ids.insert(sum.ids.end(), r.ids.begin(), r.ids.end());
    }
    std::sort(sum.ids.begin(), sum.ids.end());
    sum.ids.erase(std::unique(sum.ids.begin(), sum.ids.end()), sum.ids.end());
    absl::flat_hash_map<int64_t, int64_t> position;
    position.reserve(sum.ids.size());
    for (size_t k = 0; k < sum.ids.size(); ++k) position[sum.ids[k]] = static_cast<int64_t>(k);
    sum.values.assign(sum.ids.size() * static_cast<size_t>(width_), 0.0f);
    for (const Replica& r : replicas_) {
      if (!r.complete) continue;
      for (size_t k = 0; k < r.ids.size(); ++k) {
        FloatArray(sum.values.data() + position[r.ids[k]] * width_, width_) +=
            ConstFloatArray(r.rows.data() + k * width_, width_);
      }
    }
    ScaleForBackups(&sum.values);
    return sum;
  }
  // Dense: the first complete replica's own buffer becomes the sum when it is dense (no
  // copy); otherwise a zeroed one is allocated, before anything is moved.
  const int64_t size = rows_ * width_;
  std::vector<float>& total = sum.values;
  const auto first = std::find_if(replicas_.begin(), replicas_.end(),
                                  [](const Replica& r) { return r.complete; });
  if (first == replicas_.end() || first->kind != Replica::Kind::kDense) {
    total.assign(static_cast<size_t>(size), 0.0f);
  }
  for (Replica& r : replicas_) {
    if (!r.complete) continue;
    if (r.kind == Replica::Kind::kDense && total.empty()) {
      total = std::move(r.dense);
      continue;
    }
    if (r.kind == Replica::Kind::kDense) {
      FloatArray(total.data(), size) += ConstFloatArray(r.dense.data(), size);
    } else {
      for (size_t k = 0; k < r.ids.size(); ++k) {
        FloatArray(total.data() + r.ids[k] * width_, width_) +=
            ConstFloatArray(r.rows.data() + k * width_, width_);
      }
    }
  }
  ScaleForBackups(&total);
  return sum;
}

void SyncAccumulator::ScaleForBackups(std::vector<float>* values) const {
  // k = n: no scaling at all (not even by 1), so that the default stays bit-identical.
  if (!has_backups()) return;
  const float scale =
      static_cast<float>(num_replicas()) / static_cast<float>(replicas_to_aggregate_);
  FloatArray(values->data(), static_cast<Eigen::Index>(values->size())) *= scale;
}

void SyncAccumulator::Clear() {
  // A fresh Replica owns no memory.
  for (Replica& r : replicas_) r = Replica();
  complete_replicas_ = 0;
  touched_replicas_ = 0;
}

}  // namespace shardps
