#include "ps_server/shard.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/finite.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "math/initializer.h"
#include "partitioners/buckets.h"

namespace shardps {
namespace {

// Updates smaller than this many floats per piece are not split: waking a helper costs more.
constexpr int64_t kParallelGrain = int64_t{1} << 17;

}  // namespace

std::string QuotedShard(absl::string_view name) { return absl::StrCat("shard '", name, "'"); }

Shard::Shard(const ShardSpec& spec, Geometry geometry, std::unique_ptr<Optimizer> optimizer,
             int64_t request_id_window, std::atomic<int64_t>* snapshot_copy_bytes,
             MemoryBudget* row_budget)
    : spec_(spec),
      rows_(geometry.rows),
      width_(geometry.width),
      size_(geometry.rows * geometry.width),
      optimizer_(std::move(optimizer)),
      sync_(spec.update().mode() == UpdateSpec::SYNC),
      num_replicas_(sync_ ? spec.update().num_replicas() : 0),
      staleness_(StalenessPolicy::FromSpec(spec.update())),
      has_backups_(sync_ && spec.update().replicas_to_aggregate() > 0 &&
                   spec.update().replicas_to_aggregate() < num_replicas_),
      bytes_(static_cast<int64_t>(sizeof(float)) * size_ * (1 + optimizer_->num_slots())),
      slots_count_(static_cast<size_t>(optimizer_->num_slots())),
      snapshot_copy_bytes_(snapshot_copy_bytes),
      row_budget_(row_budget),
      params_(0, 1),
      recent_ids_(request_id_window),
      accumulator_(num_replicas_, sync_ ? spec.update().replicas_to_aggregate() : 0,
                   geometry.rows, geometry.width),
      retained_(staleness_.retained_versions) {
  if (spec.has_dynamic()) {
    const DynamicSpec& d = spec.dynamic();
    bucket_begin_.store(d.bucket_begin());
    bucket_end_.store(d.bucket_end());
    moves_ = std::make_unique<BucketMoves>(
        spec.variable().empty() ? spec.name() : spec.variable(), d.num_buckets(),
        BucketRange{d.bucket_begin(), d.bucket_end()});
  }
}

absl::StatusOr<int64_t> Shard::BytesFor(const ShardSpec& spec, Geometry geometry) {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(spec.optimizer());
  if (!optimizer.ok()) return Annotate(optimizer.status(), QuotedShard(spec.name()));
  if (spec.has_dynamic()) {
    // A dynamic table grows with its rows: its budget counts when it has one (parameters
    // and slots, as for a fixed table), else nothing is reserved up front.
    return static_cast<int64_t>(sizeof(float)) * spec.dynamic().max_rows() * geometry.width *
           (1 + (*optimizer)->num_slots());
  }
  // A SYNC shard also keeps the parameters before its last step (at most one more copy); a
  // delay-compensated one those of its retained versions, and DC-ASGD-a the mean squares.
  const StalenessPolicy staleness = StalenessPolicy::FromSpec(spec.update());
  const int copies = (spec.update().mode() == UpdateSpec::SYNC ? 2 : 1) +
                     staleness.retained_versions + (staleness.adaptive ? 1 : 0);
  return static_cast<int64_t>(sizeof(float)) * geometry.rows * geometry.width *
         (copies + (*optimizer)->num_slots());
}

absl::StatusOr<std::shared_ptr<Shard>> Shard::Create(
    const ShardSpec& spec, Geometry geometry, int64_t request_id_window,
    std::atomic<int64_t>* snapshot_copy_bytes, MemoryBudget* row_budget) {
  const std::string what = QuotedShard(spec.name());
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = Optimizer::Create(spec.optimizer());
  if (!optimizer.ok()) return Annotate(optimizer.status(), what);
  std::shared_ptr<Shard> shard;
  State state;
  try {
    shard = std::shared_ptr<Shard>(
        new Shard(spec, geometry, *std::move(optimizer), request_id_window, snapshot_copy_bytes,
                  row_budget));
    state = shard->NewState();
    absl::MutexLock lock(&shard->mu_);
    if (shard->staleness_.enabled()) shard->history_.Enable();
    if (shard->staleness_.adaptive) {
      shard->mean_square_.assign(static_cast<size_t>(shard->size_), 0.0f);
    }
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": cannot allocate ", geometry.rows * geometry.width, " floats and their slots"));
  }
  if (spec.has_dynamic()) {
    ASSIGN_OR_RETURN(std::unique_ptr<DynamicTable> table, shard->NewTable());
    absl::MutexLock lock(&shard->mu_);
    shard->table_ = std::move(table);
  }
  RETURN_IF_ERROR(shard->InitializeParams(&state.params));
  absl::MutexLock lock(&shard->mu_);
  shard->params_ = std::move(state.params);
  shard->slots_ = std::move(state.slots);
  return shard;
}

namespace {
// Cuts a dynamic shard remembers as bases of increments.
constexpr size_t kRecordedCuts = 8;
}  // namespace

absl::StatusOr<std::unique_ptr<DynamicTable>> Shard::NewTable() const {
  const DynamicSpec& d = spec_.dynamic();
  DynamicTableOptions options;
  // Initial rows are keyed by the variable, not the shard: every ps and every split of the
  // buckets gives a key the same row.
  options.name = spec_.variable().empty() ? spec_.name() : spec_.variable();
  options.dim = width_;
  options.initializer = spec_.initializer();
  options.num_buckets = d.num_buckets();
  options.all_buckets = false;
  const BucketRange range = buckets();
  for (int32_t b = range.begin; b < range.end; ++b) options.buckets.push_back(b);
  options.admit_after = d.admit_after();
  options.ttl_steps = d.ttl_steps();
  options.max_rows = d.max_rows();
  // Without a row budget, every row counts in the ps' memory budget as it is made (with one,
  // the table's max_rows were reserved when the shard was created).
  if (d.max_rows() == 0) {
    options.row_budget = row_budget_;
    options.budget_name = spec_.variable().empty() || spec_.variable() == spec_.name()
                              ? QuotedShard(name())
                              : absl::StrCat("variable '", spec_.variable(), "' (",
                                             QuotedShard(name()), ")");
  }
  absl::StatusOr<std::unique_ptr<DynamicTable>> table = DynamicTable::Create(options, *optimizer_);
  if (!table.ok()) return Annotate(table.status(), QuotedShard(name()));
  return table;
}

Shard::DynamicCut Shard::TakeDynamicCut(int64_t checkpoint_id, int64_t base) {
  DynamicCut cut;
  cut.version = version_;
  cut.buckets = buckets();
  cut.routing_version = moves_->routing_version();
  uint32_t since = 0;
  if (base > 0) {
    auto it = cut_epochs_.find(base);
    if (it != cut_epochs_.end()) {
      absl::StatusOr<std::vector<int64_t>> deleted = table_->DeletedSince(it->second);
      if (deleted.ok()) {
        since = it->second;
        cut.base_checkpoint = base;
        cut.deleted = *std::move(deleted);
      }
    }
  }
  // Changes from here on belong to the next epoch; the lock keeps pushes out meanwhile.
  const uint32_t closed = table_->AdvanceEpoch();
  // Sized first (a pass over the rows' epochs), then each row copied once, straight from the
  // table into the cut: training is paused for as long as this takes.
  const int64_t rows = table_->CountChanged(since);
  cut.keys.reserve(rows);
  cut.last_steps.reserve(rows);
  cut.tensors.resize(1 + slots_count_);
  for (std::vector<float>& tensor : cut.tensors) tensor.reserve(rows * width_);
  // Buckets staged by a move in progress are not this shard's yet: their source writes them.
  const BucketRange staged = moves_->staged();
  const int32_t num_buckets = spec_.dynamic().num_buckets();
  table_->ForEachChangedRow(since, [&](int64_t key, uint32_t last_step,
                                       const float* const* values) {
    if (staged.end > staged.begin && staged.Contains(BucketOf(key, num_buckets))) return;
    cut.keys.push_back(key);
    cut.last_steps.push_back(last_step);
    for (size_t t = 0; t <= slots_count_; ++t) {
      cut.tensors[t].insert(cut.tensors[t].end(), values[t], values[t] + width_);
    }
  });
  cut_epochs_[checkpoint_id] = closed;
  while (cut_epochs_.size() > kRecordedCuts) cut_epochs_.erase(cut_epochs_.begin());
  // Deletions no recorded cut needs any more.
  table_->ForgetDeletionsThrough(cut_epochs_.begin()->second);
  return cut;
}

void Shard::ReplaceTable(std::unique_ptr<DynamicTable> table, int64_t version) {
  table_ = std::move(table);
  refused_step_ = absl::OkStatus();
  version_ = version;
  prev_keys_.clear();
  prev_rows_.clear();
  prev_version_ = -1;
  cut_epochs_.clear();
  accumulator_.Clear();
  recent_ids_.Clear();
  moves_->TableReplaced();
}

void Shard::StartAt(int64_t version, int64_t routing_version) {
  version_ = version;
  moves_->StartAt(routing_version);
}

absl::Status Shard::CheckMovedKeys(absl::Span<const int64_t> keys, bool push,
                                   int64_t routing_version, absl::string_view what) const {
  return moves_->Check(keys, push, routing_version, absl::Now(), what);
}

absl::Status Shard::MoveBuckets(const MoveBucketsRequest& request,
                                MoveBucketsResponse* response) {
  ASSIGN_OR_RETURN(BucketMoveOutcome outcome,
                   moves_->Apply(request, table_.get(), sync_ && accumulator_.in_progress(),
                                 absl::Now(), response));
  response->set_version(version_);
  if (outcome.range_changed) {
    const BucketRange range = moves_->range();
    bucket_begin_.store(range.begin, std::memory_order_release);
    bucket_end_.store(range.end, std::memory_order_release);
    // The next checkpoint writes every row: an increment is relative to the buckets held
    // at its base.
    cut_epochs_.clear();
  }
  return absl::OkStatus();
}

absl::Status Shard::CheckKeys(absl::Span<const int64_t> keys, absl::string_view what) const {
  const DynamicSpec& d = spec_.dynamic();
  const BucketRange range = buckets();
  for (size_t k = 0; k < keys.size(); ++k) {
    const int32_t bucket = BucketOf(keys[k], d.num_buckets());
    if (!range.Contains(bucket)) {
      ErrorDetail detail;
      detail.set_kind(ErrorDetail::BUCKET_MOVED);
      detail.set_ps_task(-1);
      detail.set_variable(spec_.variable().empty() ? spec_.name() : spec_.variable());
      detail.set_bucket(bucket);
      return WithDetail(
          absl::AbortedError(absl::StrCat(
              what, ": key ", keys[k], " at position ", k, " is in bucket ", bucket, " of ",
              d.num_buckets(), ", which ", QuotedShard(name()), " does not hold (it holds [",
              range.begin, ", ", range.end, ")); the caller's layout is out of date")),
          detail);
    }
  }
  return absl::OkStatus();
}

absl::Status Shard::PullKeys(absl::Span<const int64_t> keys, int64_t version, float* out) const {
  const bool previous = version != version_;
  if (previous && (prev_version_ < 0 || version != prev_version_)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "pull from ", QuotedShard(name()), ": version ", version,
        " is not held any more (the shard is at version ", version_,
        "; a SYNC shard keeps the version before its last step, an ASYNC shard only its "
        "current one)"));
  }
  RETURN_IF_ERROR(table_->Pull(
      keys, absl::MakeSpan(out, keys.size() * static_cast<size_t>(width_))));
  if (previous) {
    // The rows the last step changed, as they were.
    const size_t row_bytes = static_cast<size_t>(width_) * sizeof(float);
    for (size_t k = 0; k < keys.size(); ++k) {
      auto it = std::lower_bound(prev_keys_.begin(), prev_keys_.end(), keys[k]);
      if (it != prev_keys_.end() && *it == keys[k]) {
        std::memcpy(out + k * width_, prev_rows_.data() + (it - prev_keys_.begin()) * width_,
                    row_bytes);
      }
    }
  }
  return absl::OkStatus();
}

void Shard::KeepEvictedRows(const RowBatch& evicted) {
  // A push never evicts a row it touches, so these keys are not in prev_keys_ (sorted: the
  // step's summed ids); the merged list is sorted again for PullKeys' binary search.
  const size_t width = static_cast<size_t>(width_);
  const size_t row_floats = width * (1 + slots_count_);
  std::vector<std::pair<int64_t, const float*>> rows;
  rows.reserve(prev_keys_.size() + evicted.keys.size());
  for (size_t k = 0; k < prev_keys_.size(); ++k) {
    rows.push_back({prev_keys_[k], prev_rows_.data() + k * width});
  }
  for (size_t k = 0; k < evicted.keys.size(); ++k) {
    rows.push_back({evicted.keys[k], evicted.values.data() + k * row_floats});  // parameters first
  }
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<int64_t> keys(rows.size());
  std::vector<float> values(rows.size() * width);
  for (size_t k = 0; k < rows.size(); ++k) {
    keys[k] = rows[k].first;
    std::copy(rows[k].second, rows[k].second + width, values.begin() + k * width);
  }
  prev_keys_ = std::move(keys);
  prev_rows_ = std::move(values);
}

absl::Status Shard::ApplyKeys(absl::Span<const int64_t> keys, const float* grad) {
  RETURN_IF_ERROR(Annotate(
      table_->Push(keys, absl::MakeConstSpan(grad, keys.size() * static_cast<size_t>(width_)),
                   *optimizer_, version_ + 1)
          .status(),
      Described()));
  ++version_;
  return absl::OkStatus();
}

Shard::State Shard::NewState(bool initialize_slots) const {
  State state{ParamBlocks(rows_, width_), {}};
  state.params.set_snapshot_copy_sink(snapshot_copy_bytes_);
  state.slots.reserve(slots_count_);
  for (size_t s = 0; s < slots_count_; ++s) {
    state.slots.emplace_back(rows_, width_);
    if (initialize_slots) {
      state.slots.back().Fill(optimizer_->initial_slot_value(static_cast<int>(s)));
    }
    state.slots.back().set_snapshot_copy_sink(snapshot_copy_bytes_);
  }
  return state;
}

absl::Status Shard::InitializeParams(ParamBlocks* params) const {
  // Block by block (blocks hold whole rows); values are keyed by global element index, so
  // they do not depend on the blocks either.
  absl::Status status;
  params->Writable(0, rows_);
  params->ForEachRun(0, size_, [&](int64_t first, float* p, int64_t n) {
    if (!status.ok()) return;
    status = InitializeRows(
        spec_.initializer(), spec_.variable().empty() ? spec_.name() : spec_.variable(),
        absl::MakeConstSpan(spec_.full_shape().dim().data(),
                            static_cast<size_t>(spec_.full_shape().dim_size())),
        spec_.row_offset() + first / width_, absl::MakeSpan(p, static_cast<size_t>(n)));
  });
  return Annotate(status, QuotedShard(name()));
}

Shard::Snapshot Shard::TakeSnapshot() const {
  Snapshot snapshot;
  snapshot.version = version_;
  snapshot.tensors.resize(1 + slots_count_);
  params_.ShareForSnapshot(0, size_, &snapshot.tensors[0].pieces, &snapshot.tensors[0].holds);
  for (size_t s = 0; s < slots_count_; ++s) {
    Snapshot::Tensor& tensor = snapshot.tensors[1 + s];
    tensor.slot = std::string(optimizer_->slot_name(static_cast<int>(s)));
    slots_[s].ShareForSnapshot(0, size_, &tensor.pieces, &tensor.holds);
  }
  return snapshot;
}

void Shard::ReplaceState(State state, int64_t version) {
  ranges_.reset();
  prev_params_ = ParamBlocks();
  prev_version_ = -1;
  ForgetHistory();
  // DC-ASGD-a's mean squares are not part of a checkpoint: they start afresh.
  std::fill(mean_square_.begin(), mean_square_.end(), 0.0f);
  params_ = std::move(state.params);
  slots_ = std::move(state.slots);
  version_ = version;
  accumulator_.Clear();
  recent_ids_.Clear();
  refused_step_ = absl::OkStatus();
}

Shard::WritableState Shard::MakeWritable(int64_t row_begin, int64_t row_end) {
  WritableState state{params_.Writable(row_begin, row_end), {}};
  for (size_t s = 0; s < slots_count_; ++s) {
    state.slots[s] = slots_[s].Writable(row_begin, row_end);
  }
  return state;
}

Shard::WritableState Shard::MakeWritableRows(absl::Span<const int64_t> ids) {
  WritableState state{params_.WritableRows(ids), {}};
  for (size_t s = 0; s < slots_count_; ++s) state.slots[s] = slots_[s].WritableRows(ids);
  return state;
}

absl::Status Shard::CheckBaseVersion(int64_t base_version) const {
  if (base_version < 0 || base_version > version_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "base_version ", base_version, " is not a version of ", QuotedShard(name()),
        " (at version ", version_, "): a gradient is computed on a version the shard had, "
        "0 when unknown"));
  }
  return absl::OkStatus();
}

Shard::PushPolicy Shard::PolicyFor(int64_t base_version, int64_t begin, int64_t end) {
  PushPolicy policy;
  if (base_version <= 0 || !staleness_.enabled()) return policy;
  const int64_t staleness = history_.Staleness(base_version, version_, begin, end);
  StalenessStats& stats = staleness_stats_;
  ++stats.pushes_with_base;
  stats.total_staleness += staleness;
  stats.max_staleness = std::max(stats.max_staleness, staleness);
  policy.lr_scale = staleness_.LrScale(staleness);
  // No update touched these rows since the base version: w_now equals w_bak there.
  if (!staleness_.compensates() || staleness == 0) return policy;
  bool exact = false;
  policy.bak = retained_.Find(base_version, &exact);
  if (policy.bak == nullptr) {
    ++stats.uncompensated;
  } else if (exact) {
    ++stats.compensated;
  } else {
    ++stats.compensated_partially;
  }
  return policy;
}

void Shard::BeforeAsyncUpdate() {
  if (staleness_.compensates()) retained_.Retain(version_, params_);
}

void Shard::AfterAsyncUpdate(int64_t begin, int64_t end) { history_.Record(version_, begin, end); }

void Shard::ForgetHistory() {
  history_.Clear();
  retained_.Clear();
}

int64_t Shard::StalenessBytes() const {
  return retained_.ExtraBytes(params_) +
         static_cast<int64_t>(mean_square_.size() * sizeof(float));
}

absl::Status Shard::ApplyDense(RowRange range, const GradientBytes& grad,
                               ParallelFor* parallel, int64_t base_version, float grad_max_abs) {
  const int64_t offset = range.begin * width_;
  const int64_t n = range.size() * width_;
  const int64_t step = version_ + 1;
  const PushPolicy policy = PolicyFor(base_version, range.begin, range.end);
  // Delay compensation (and DC-ASGD-a's mean squares, which every push updates) reads the
  // gradient once more and applies the compensated copy (uninitialized until then: zeroing
  // it first cost a tenth of the compensation).
  std::unique_ptr<float[]> compensated;
  GradientBytes compensated_bytes;
  const GradientBytes* applied = &grad;
  const bool compensate = policy.bak != nullptr;
  if (compensate || !mean_square_.empty()) {
    if (compensate) compensated.reset(new float[static_cast<size_t>(n)]);
    float* out = compensated.get();
    const ParamBlocks& now = params_;
    const ParamBlocks* bak = policy.bak;
    float* mean_square = mean_square_.empty() ? nullptr : mean_square_.data();
    // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
    // analysis cannot follow the lock across threads.
    parallel->Run(n, kParallelGrain, /*align=*/16,
                  [&](int64_t begin, int64_t end) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    grad.ForEachRun(begin, end,
                                    [&](int64_t first, const float* g, int64_t m)
                                        ABSL_NO_THREAD_SAFETY_ANALYSIS {
                      now.ForEachRun(offset + first, offset + first + m,
                                     [&](int64_t e, const float* w, int64_t k) {
                                       // Runs lie in one block; the same block in both
                                       // views means rows unchanged since the base.
                                       const float* old =
                                           bak == nullptr ? nullptr
                                                          : bak->Row(e / width_) + e % width_;
                                       if (old == w) old = nullptr;
                                       DelayCompensate(
                                           staleness_, k, g + (e - offset - first), w, old,
                                           mean_square == nullptr ? nullptr : mean_square + e,
                                           out == nullptr ? nullptr : out + (e - offset));
                                     });
                    });
                  });
    if (compensate) {
      compensated_bytes =
          GradientBytes(absl::string_view(reinterpret_cast<const char*>(compensated.get()),
                                          static_cast<size_t>(n) * sizeof(float)));
      applied = &compensated_bytes;
    }
  }
  const double lr_scale = policy.lr_scale;
  ASSIGN_OR_RETURN(std::optional<Optimizer::Ranges> ranges_after,
                   CheckDenseUpdate(step, lr_scale, offset, *applied, n,
                                    compensate ? -1.0f : grad_max_abs, parallel,
                                    absl::StrCat("update ", step)));
  BeforeAsyncUpdate();
  const WritableState state = MakeWritable(range.begin, range.end);
  // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
  // analysis cannot follow the lock across threads.
  parallel->Run(n, kParallelGrain, /*align=*/16,
                [&](int64_t begin, int64_t end) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                  applied->ForEachRun(begin, end,
                                      [&](int64_t first, const float* g, int64_t m)
                                          ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                            ApplyDenseRun(step, lr_scale, offset + first, g, m,
                                                          state);
                                          });
                });
  ranges_ = ranges_after;
  ++version_;
  AfterAsyncUpdate(range.begin, range.end);
  return absl::OkStatus();
}

void Shard::ApplyDenseRun(int64_t step, double lr_scale, int64_t first, const float* grad,
                          int64_t n, const WritableState& state) {
  params_.ForEachRun(first, first + n, [&](int64_t e, float* p, int64_t m) {
    // A run lies in one block, and a slot's block holds the same rows: its elements
    // [e, e + m) are contiguous too.
    std::array<float*, Optimizer::kMaxSlots> at{};
    for (size_t s = 0; s < slots_count_; ++s) at[s] = state.slots[s].Row(e / width_) + e % width_;
    optimizer_->ApplyDenseScaled(step, lr_scale,
                                 absl::MakeConstSpan(grad + (e - first), static_cast<size_t>(m)),
                                 p, absl::Span<float* const>(at.data(), slots_count_));
  });
}

absl::Status Shard::ApplyRows(absl::Span<const int64_t> ids, const float* grad,
                              ParallelFor* parallel, int64_t base_version) {
  const int64_t step = version_ + 1;
  int64_t lowest = rows_;
  int64_t highest = -1;
  if (staleness_.enabled()) {
    for (int64_t id : ids) {
      lowest = std::min(lowest, id);
      highest = std::max(highest, id);
    }
  }
  const PushPolicy policy = PolicyFor(base_version, lowest, highest + 1);
  const int64_t grain = std::max<int64_t>(1, kParallelGrain / width_);
  std::unique_ptr<float[]> compensated;
  const float* applied = grad;
  const bool compensate = policy.bak != nullptr;
  if (compensate || !mean_square_.empty()) {
    if (compensate) compensated.reset(new float[ids.size() * static_cast<size_t>(width_)]);
    float* out = compensated.get();
    const ParamBlocks* bak = policy.bak;
    float* mean_square = mean_square_.empty() ? nullptr : mean_square_.data();
    // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
    // analysis cannot follow the lock across threads.
    parallel->Run(static_cast<int64_t>(ids.size()), grain, /*align=*/1,
                  [&](int64_t begin, int64_t end) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    for (int64_t k = begin; k < end; ++k) {
                      const int64_t id = ids[static_cast<size_t>(k)];
                      const float* w = params_.Row(id);
                      const float* old = bak == nullptr ? nullptr : bak->Row(id);
                      if (old == w) old = nullptr;
                      DelayCompensate(staleness_, width_, grad + k * width_, w, old,
                                      mean_square == nullptr ? nullptr : mean_square + id * width_,
                                      out == nullptr ? nullptr : out + k * width_);
                    }
                  });
    if (compensate) applied = compensated.get();
  }
  const double lr_scale = policy.lr_scale;
  RETURN_IF_ERROR(CheckFiniteRows(step, lr_scale, ids, applied, absl::StrCat("update ", step)));
  BeforeAsyncUpdate();
  ranges_.reset();  // the exact check ran; the rows' values are not scanned
  const WritableState state = MakeWritableRows(ids);
  // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
  // analysis cannot follow the lock across threads.
  parallel->Run(static_cast<int64_t>(ids.size()), grain,
                /*align=*/1, [&](int64_t begin, int64_t end) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                  optimizer_->ApplyRowsScaled(step, lr_scale, ids.subspan(begin, end - begin),
                                              applied + begin * width_, state.params,
                                              SlotSpan(state));
                });
  ++version_;
  AfterAsyncUpdate(lowest, highest + 1);
  return absl::OkStatus();
}

std::string Shard::Described() const {
  if (spec_.variable().empty() || spec_.variable() == spec_.name()) return QuotedShard(name());
  return absl::StrCat("variable '", spec_.variable(), "' (", QuotedShard(name()), ")");
}

absl::Status Shard::NonFinite(absl::string_view update, int64_t row, int64_t column,
                              float grad) const {
  return absl::InvalidArgumentError(absl::StrCat(
      Described(), ": ", update, " would make row ", row, " (element ", column,
      ") of the parameters or an optimizer slot non-finite (its gradient there is ", grad,
      ", optimizer ", OptimizerSpec::Type_Name(spec_.optimizer().type()),
      "); refused, the shard is unchanged"));
}

absl::Status Shard::CheckFiniteDense(int64_t step, double lr_scale, int64_t first,
                                     const GradientBytes& grad, int64_t n, ParallelFor* parallel,
                                     absl::string_view update) const {
  // The lowest bad element found by the pieces (n: none) and its gradient.
  absl::Mutex mu;
  int64_t bad = n;
  float bad_grad = 0;
  const ParamBlocks& params = params_;
  // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
  // analysis cannot follow the lock across threads.
  parallel->Run(n, kParallelGrain, /*align=*/16,
                [&](int64_t begin, int64_t end) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                  grad.ForEachRun(begin, end, [&](int64_t at, const float* g, int64_t m)
                                                  ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    params.ForEachRun(
                        first + at, first + at + m,
                        [&](int64_t e, const float* p, int64_t k) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                          std::array<const float*, Optimizer::kMaxSlots> at_slots{};
                          for (size_t s = 0; s < slots_count_; ++s) {
                            at_slots[s] = slots_[s].Row(e / width_) + e % width_;
                          }
                          const float* ge = g + (e - first - at);
                          const int64_t i = optimizer_->FirstNonFiniteDense(
                              step, lr_scale, absl::MakeConstSpan(ge, static_cast<size_t>(k)), p,
                              absl::Span<const float* const>(at_slots.data(), slots_count_));
                          if (i == k) return;
                          absl::MutexLock lock(&mu);
                          if (e - first + i < bad) {
                            bad = e - first + i;
                            bad_grad = ge[i];
                          }
                        });
                  });
                });
  if (bad == n) return absl::OkStatus();
  const int64_t element = first + bad;
  return NonFinite(update, element / width_, element % width_, bad_grad);
}

absl::StatusOr<std::optional<Optimizer::Ranges>> Shard::CheckDenseUpdate(
    int64_t step, double lr_scale, int64_t first, const GradientBytes& grad, int64_t n,
    float grad_max_abs, ParallelFor* parallel, absl::string_view update) {
  // The largest |gradient| (known from the request's check, else one read of it, far cheaper
  // than the update on copies), then the optimizer's bound over the ranges the shard's values
  // are known to lie in.
  absl::Mutex mu;
  float max_abs = std::max(grad_max_abs, 0.0f);
  if (grad_max_abs < 0) {
    parallel->Run(n, kParallelGrain, /*align=*/16, [&](int64_t begin, int64_t end) {
      float local = 0;
      grad.ForEachRun(begin, end, [&](int64_t, const float* g, int64_t m) {
        local = std::max(local, MaxAbs(g, m));
      });
      absl::MutexLock lock(&mu);
      max_abs = std::max(max_abs, local);
    });
  }
  if (!ranges_.has_value()) ranges_ = ScanRanges();
  std::optional<Optimizer::Ranges> after =
      optimizer_->RangesAfter(step, lr_scale, max_abs, *ranges_);
  if (after.has_value()) return after;
  RETURN_IF_ERROR(CheckFiniteDense(step, lr_scale, first, grad, n, parallel, update));
  return std::nullopt;
}

Optimizer::Ranges Shard::ScanRanges() const {
  Optimizer::Ranges ranges;
  auto scan = [this](const ParamBlocks& blocks, double* lo, double* hi) {
    float l = std::numeric_limits<float>::infinity(), h = -l;
    blocks.ForEachRun(0, size_, [&](int64_t, const float* v, int64_t m) {
      const FloatRange r = RangeOf(v, m);
      l = std::min(l, r.lo);
      h = std::max(h, r.hi);
    });
    *lo = l;
    *hi = h;
  };
  scan(params_, &ranges.lo[0], &ranges.hi[0]);
  for (size_t s = 0; s < slots_count_; ++s) scan(slots_[s], &ranges.lo[1 + s], &ranges.hi[1 + s]);
  return ranges;
}

absl::Status Shard::CheckFiniteRows(int64_t step, double lr_scale, absl::Span<const int64_t> ids,
                                    const float* grad, absl::string_view update) const {
  std::array<RowBlocks, Optimizer::kMaxSlots> slots{};
  for (size_t s = 0; s < slots_count_; ++s) slots[s] = slots_[s].ReadRows();
  const int64_t bad = optimizer_->FirstNonFiniteRows(
      step, lr_scale, ids, grad, params_.ReadRows(),
      absl::Span<const RowBlocks>(slots.data(), slots_count_));
  if (bad == static_cast<int64_t>(ids.size()) * width_) return absl::OkStatus();
  return NonFinite(update, ids[static_cast<size_t>(bad / width_)], bad % width_, grad[bad]);
}

absl::Status Shard::CheckStep(int64_t step) const {
  if (step < version_) {
    return WithDetail(absl::AbortedError(absl::StrCat("stale step ", step, ": ",
                                                      QuotedShard(name()), " is at version ",
                                                      version_)),
                      ErrorDetail::STALE_STEP);
  }
  if (step > version_) {
    return absl::FailedPreconditionError(
        absl::StrCat("step ", step, " is ahead of ", QuotedShard(name()), " at version ",
                     version_, "; wait for the version (pull with min_version) first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<UpdateResult> Shard::AddDense(int replica, RowRange range,
                                             const GradientBytes& grad) {
  return FinishIfComplete(accumulator_.AddDense(replica, range.begin, range.end, grad));
}

absl::StatusOr<UpdateResult> Shard::AddRows(int replica, std::vector<int64_t> ids,
                                            std::vector<float> rows) {
  absl::StatusOr<SyncAccumulator::Result> result =
      accumulator_.AddRows(replica, std::move(ids), std::move(rows));
  if (!result.ok()) {
    return Annotate(result.status(), absl::StrCat(QuotedShard(name()), " step ", version_));
  }
  return FinishIfComplete(*result);
}

absl::StatusOr<UpdateResult> Shard::FinishIfComplete(const SyncAccumulator::Result& result) {
  UpdateResult update;
  update.duplicate = result.duplicate;
  update.dropped = result.dropped;
  if (result.complete) {
    RETURN_IF_ERROR(FinishStep());
    update.applied = true;
  }
  return update;
}

absl::Status Shard::FinishStep() {
  // Everything that may run out of memory comes before the first write: the blocks are made
  // writable (copies keep the values), then the sum is taken (which may move the first
  // replica's buffer out of the accumulator), then the sum is checked (an overflow refuses
  // the step, the shard as it was: the copies hold the same values).
  const int64_t step = version_ + 1;
  const std::string update = absl::StrCat("sync step ", version_, " (update ", step,
                                          ", the sum of its replicas' gradients)");
  // The parameters of this version stay readable for the step's re-runs (ParamsAt); the
  // writes below copy the blocks they change. A refused step puts the old ones back.
  ParamBlocks kept_prev = std::move(prev_params_);
  const int64_t kept_prev_version = prev_version_;
  prev_params_ = params_.ShareAll();
  prev_version_ = version_;
  auto refuse = [&](absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    prev_params_ = std::move(kept_prev);
    prev_version_ = kept_prev_version;
    refused_step_ = Annotate(status, "the step is refused for all its replicas");
    LogWarning() << refused_step_;
    return refused_step_;
  };
  if (dynamic()) {
    // Keeps the rows the step changes, as they are, then applies the step through the table;
    // the rows the step's push evicts (ttl, budget) are kept too, as they were. A re-run of
    // the step reads the version before it from these.
    SyncAccumulator::StepGradient sum = accumulator_.Sum();
    std::vector<float> before(sum.values.size());
    RowBatch evicted;
    absl::Status status = table_->Pull(sum.ids, absl::MakeSpan(before));
    if (status.ok()) {
      status = table_->Push(sum.ids, sum.values, *optimizer_, step, 1.0, &evicted).status();
    }
    // Every key was checked when it was pushed, every gradient is finite; the table refuses
    // a sum that would overflow a row, or new rows past the memory budget, changing nothing.
    if (!status.ok()) return refuse(Annotate(status, absl::StrCat(Described(), ": ", update)));
    prev_keys_ = std::move(sum.ids);
    prev_rows_ = std::move(before);
    if (!evicted.keys.empty()) KeepEvictedRows(evicted);
    ++version_;
    accumulator_.Clear();
    return absl::OkStatus();
  }
  if (accumulator_.rows_only()) {
    SyncAccumulator::StepGradient sum = accumulator_.Sum();
    if (!sum.ids.empty()) {
      absl::Status finite = CheckFiniteRows(step, 1.0, sum.ids, sum.values.data(), update);
      if (!finite.ok()) return refuse(finite);
      ranges_.reset();
      const WritableState state = MakeWritableRows(sum.ids);
      optimizer_->ApplyRows(step, sum.ids, sum.values.data(), state.params, SlotSpan(state));
    }
  } else {
    const WritableState state = MakeWritable(0, rows_);
    SyncAccumulator::StepGradient sum = accumulator_.Sum();
    const absl::string_view bytes(reinterpret_cast<const char*>(sum.values.data()),
                                  sum.values.size() * sizeof(float));
    ParallelFor serial(0);
    absl::StatusOr<std::optional<Optimizer::Ranges>> ranges_after =
        CheckDenseUpdate(step, 1.0, 0, GradientBytes(bytes), size_, -1, &serial, update);
    if (!ranges_after.ok()) return refuse(ranges_after.status());
    ApplyDenseRun(step, /*lr_scale=*/1.0, 0, sum.values.data(), size_, state);
    ranges_ = *ranges_after;
  }
  ++version_;
  accumulator_.Clear();
  return absl::OkStatus();
}

void Shard::Assign(RowRange range, const float* values, bool reset_slots) {
  ranges_.reset();
  prev_params_ = ParamBlocks();  // an assignment is no step: no version before it to serve
  prev_version_ = -1;
  // Nor a version for delay compensation to diff against: w_now - w_bak would include the
  // assignment. Pushes based on earlier versions compensate against the versions after it.
  ForgetHistory();
  const int64_t offset = range.begin * width_;
  const int64_t n = range.size() * width_;
  // Every block that changes is made writable before the first write.
  if (reset_slots) {
    MakeWritable(range.begin, range.end);
  } else {
    params_.Writable(range.begin, range.end);
  }
  params_.ForEachRun(offset, offset + n, [&](int64_t first, float* p, int64_t m) {
    std::memcpy(p, values + (first - offset), static_cast<size_t>(m) * sizeof(float));
  });
  if (reset_slots) {
    for (size_t s = 0; s < slots_count_; ++s) {
      const float initial = optimizer_->initial_slot_value(static_cast<int>(s));
      slots_[s].ForEachRun(offset, offset + n,
                           [initial](int64_t, float* v, int64_t m) { std::fill_n(v, m, initial); });
    }
  }
}

const ParamBlocks* Shard::ParamsAt(int64_t version) const {
  if (version == version_) return &params_;
  if (prev_version_ >= 0 && version == prev_version_) return &prev_params_;
  return nullptr;
}

void Shard::CopyRange(RowRange range, float* out) const { CopyRange(params_, range, out); }

void Shard::ShareRange(RowRange range, std::vector<absl::string_view>* pieces,
                       std::vector<std::shared_ptr<const void>>* holds) const {
  ShareRange(params_, range, pieces, holds);
}

void Shard::CopyRows(absl::Span<const int64_t> ids, char* out) const {
  CopyRows(params_, ids, out);
}

void Shard::CopyRange(const ParamBlocks& params, RowRange range, float* out) const {
  params.CopyOut(range.begin * width_, range.end * width_, out);
}

void Shard::ShareRange(const ParamBlocks& params, RowRange range,
                       std::vector<absl::string_view>* pieces,
                       std::vector<std::shared_ptr<const void>>* holds) const {
  params.Share(range.begin * width_, range.end * width_, pieces, holds);
}

void Shard::CopyRows(const ParamBlocks& params, absl::Span<const int64_t> ids, char* out) const {
  const size_t row_bytes = static_cast<size_t>(width_) * sizeof(float);
  for (size_t k = 0; k < ids.size(); ++k) {
    std::memcpy(out + k * row_bytes, params.Row(ids[k]), row_bytes);
  }
}

}  // namespace shardps
