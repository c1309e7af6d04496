// Layout. Rows live in per-stripe chunks of 4096 rows mapped with mmap (params, each slot,
// last-push step and change epoch as arrays; 8 bytes of metadata per row), never moved, freed
// rows reused from a free list: no per-row heap allocation. Each stripe's index is open
// addressing with linear probing, an 8-byte key and a 4-byte row number per slot (0 = empty,
// so fresh pages need no fill), grown by 1.5x at load 0.85; growth rehashes one stripe's
// index, never the rows. Each stripe has a reader-writer mutex: pulls take it shared, pushes
// exclusive, so pushes to different stripes and pulls run in parallel.
//
// Admission sketch: conservative update, every counter halved after 8 x width increments so
// that old counts fade. Budget eviction takes a stripe down to its share less 1/256, dropping
// the rows whose last push is below a quantile of sampled last-push steps (approximate LRU).
#include "ps_server/dynamic_table.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/finite.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

constexpr uint64_t kIndexSalt = 0x9E3779B97F4A7C15ULL;
// Salts the admission sketch apart from the index (BucketOf uses the same value).
constexpr uint64_t kSketchSalt = 0x2545F4914F6CDD1DULL;
constexpr uint64_t kStripeSalt = 0xD1B54A32D192ED03ULL;
constexpr int kChunkShift = 12;  // 4096 rows a chunk
constexpr int64_t kChunkRows = int64_t{1} << kChunkShift;
constexpr double kMaxLoad = 0.85;
constexpr uint64_t kMinIndexCapacity = 64;
constexpr int kSketchDepth = 4;
constexpr int kEvictionSamples = 1024;
// A row's share of its stripe's index: a key and a row number (12 bytes) at a load between
// 0.57 and 0.85, rounded up.
constexpr int64_t kIndexBytesPerRow = 24;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint32_t StepStamp(int64_t step) {
  return static_cast<uint32_t>(
      std::min<int64_t>(step, std::numeric_limits<uint32_t>::max()));
}

// Anonymous memory from mmap: page-granular, zero-filled and not resident until touched, and
// given back to the system when unmapped (a heap allocation this large could stay in the
// heap after free).
class Mapped {
 public:
  Mapped() = default;
  explicit Mapped(size_t bytes) : bytes_(bytes) {
    if (bytes == 0) return;
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    data_ = p;
  }
  ~Mapped() {
    if (data_ != nullptr) munmap(data_, bytes_);
  }
  Mapped(Mapped&& o) noexcept : data_(o.data_), bytes_(o.bytes_) {
    o.data_ = nullptr;
    o.bytes_ = 0;
  }
  Mapped& operator=(Mapped&& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  template <typename T>
  T* as(size_t byte_offset = 0) const {
    return reinterpret_cast<T*>(static_cast<char*>(data_) + byte_offset);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace

// One lock stripe: an open-addressing index from key to row number, and the rows in chunks.
struct DynamicTable::Stripe {
  mutable absl::Mutex mu;

  // Index: keys[i] and rows[i] (row number + 1; 0 = empty), linear probing from
  // Home(key) = Mix64(key + kIndexSalt) scaled to the capacity.
  Mapped index_keys ABSL_GUARDED_BY(mu);
  Mapped index_rows ABSL_GUARDED_BY(mu);
  uint64_t capacity ABSL_GUARDED_BY(mu) = 0;
  int64_t size ABSL_GUARDED_BY(mu) = 0;

  // Rows: chunk c holds rows [c * kChunkRows, (c + 1) * kChunkRows) as arrays: params, each
  // slot (kChunkRows * dim floats each), last-push step and change epoch (uint32 each).
  std::vector<Mapped> chunks ABSL_GUARDED_BY(mu);
  std::vector<float*> param_blocks ABSL_GUARDED_BY(mu);
  std::vector<float*> slot_blocks[Optimizer::kMaxSlots] ABSL_GUARDED_BY(mu);
  std::vector<uint32_t*> step_blocks ABSL_GUARDED_BY(mu);
  std::vector<uint32_t*> epoch_blocks ABSL_GUARDED_BY(mu);
  std::vector<uint32_t> free_rows ABSL_GUARDED_BY(mu);
  uint32_t next_row ABSL_GUARDED_BY(mu) = 0;

  // Admission: kSketchDepth rows of sketch_width uint8 counters.
  std::unique_ptr<uint8_t[]> sketch ABSL_GUARDED_BY(mu);
  uint64_t sketch_increments ABSL_GUARDED_BY(mu) = 0;

  // Deletions for incremental checkpoints.
  struct Deletion {
    int64_t key;
    uint32_t epoch;
  };
  std::vector<Deletion> deletions ABSL_GUARDED_BY(mu);
  uint32_t deletions_lost_through ABSL_GUARDED_BY(mu) = 0;

  int32_t held_buckets ABSL_GUARDED_BY(mu) = 0;  // of those mapped to this stripe
  uint32_t newest_step ABSL_GUARDED_BY(mu) = 0;
  uint32_t last_ttl_sweep ABSL_GUARDED_BY(mu) = 0;

  int64_t created ABSL_GUARDED_BY(mu) = 0;
  int64_t evicted_ttl ABSL_GUARDED_BY(mu) = 0;
  int64_t evicted_budget ABSL_GUARDED_BY(mu) = 0;
  int64_t denied ABSL_GUARDED_BY(mu) = 0;
  int64_t dropped ABSL_GUARDED_BY(mu) = 0;

  int64_t* Keys() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return index_keys.as<int64_t>(); }
  uint32_t* Rows() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return index_rows.as<uint32_t>(); }
  uint64_t Home(int64_t key) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    const uint64_t h = Mix64(static_cast<uint64_t>(key) + kIndexSalt);
    return static_cast<uint64_t>((static_cast<unsigned __int128>(h) * capacity) >> 64);
  }
  uint64_t Next(uint64_t i) const ABSL_SHARED_LOCKS_REQUIRED(mu) { return i + 1 == capacity ? 0 : i + 1; }

  // The row of `key`, or -1.
  int64_t Find(int64_t key) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    if (capacity == 0) return -1;
    const int64_t* keys = Keys();
    const uint32_t* rows = Rows();
    for (uint64_t i = Home(key);; i = Next(i)) {
      if (rows[i] == 0) return -1;
      if (keys[i] == key) return static_cast<int64_t>(rows[i]) - 1;
    }
  }

  void InsertNoGrow(int64_t key, uint32_t row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int64_t* keys = Keys();
    uint32_t* rows = Rows();
    uint64_t i = Home(key);
    while (rows[i] != 0) i = Next(i);
    keys[i] = key;
    rows[i] = row + 1;
  }

  // Adds key -> row (the key is absent). Grows the index (only) by 1.5x past kMaxLoad.
  void Insert(int64_t key, uint32_t row) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (static_cast<double>(size + 1) > kMaxLoad * static_cast<double>(capacity)) {
      const uint64_t new_capacity = std::max<uint64_t>(kMinIndexCapacity, capacity + capacity / 2);
      Mapped old_keys = std::move(index_keys);
      Mapped old_rows = std::move(index_rows);
      const uint64_t old_capacity = capacity;
      index_keys = Mapped(new_capacity * sizeof(int64_t));
      index_rows = Mapped(new_capacity * sizeof(uint32_t));
      capacity = new_capacity;
      const int64_t* ok = old_keys.as<int64_t>();
      const uint32_t* orow = old_rows.as<uint32_t>();
      for (uint64_t i = 0; i < old_capacity; ++i) {
        if (orow[i] != 0) InsertNoGrow(ok[i], orow[i] - 1);
      }
    }
    InsertNoGrow(key, row);
    ++size;
  }

  // Removes `key` (present), shifting later entries of its probe run back (no tombstones).
  void Erase(int64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    int64_t* keys = Keys();
    uint32_t* rows = Rows();
    uint64_t hole = Home(key);
    while (keys[hole] != key || rows[hole] == 0) hole = Next(hole);
    for (uint64_t j = Next(hole); rows[j] != 0; j = Next(j)) {
      const uint64_t home = Home(keys[j]);
      const uint64_t dist_home = (j + capacity - home) % capacity;
      const uint64_t dist_hole = (j + capacity - hole) % capacity;
      if (dist_home >= dist_hole) {
        keys[hole] = keys[j];
        rows[hole] = rows[j];
        hole = j;
      }
    }
    rows[hole] = 0;
    --size;
  }

  template <typename Fn>  // fn(int64_t key, uint32_t row)
  void ForEach(Fn fn) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    const int64_t* keys = Keys();
    const uint32_t* rows = Rows();
    for (uint64_t i = 0; i < capacity; ++i) {
      if (rows[i] != 0) fn(keys[i], rows[i] - 1);
    }
  }

  float* Param(uint32_t r, int64_t dim) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    return param_blocks[r >> kChunkShift] + (r & (kChunkRows - 1)) * dim;
  }
  float* Slot(int s, uint32_t r, int64_t dim) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    return slot_blocks[s][r >> kChunkShift] + (r & (kChunkRows - 1)) * dim;
  }
  uint32_t& Step(uint32_t r) const ABSL_SHARED_LOCKS_REQUIRED(mu) { return step_blocks[r >> kChunkShift][r & (kChunkRows - 1)]; }
  uint32_t& Epoch(uint32_t r) const ABSL_SHARED_LOCKS_REQUIRED(mu) {
    return epoch_blocks[r >> kChunkShift][r & (kChunkRows - 1)];
  }
};

DynamicTable::DynamicTable(const DynamicTableOptions& options, KeyedRowInitializer initializer,
                           const Optimizer& optimizer)
    : name_(options.name),
      dim_(options.dim),
      num_slots_(optimizer.num_slots()),
      num_buckets_(options.num_buckets),
      num_stripes_(options.num_stripes),
      admit_after_(options.admit_after),
      ttl_steps_(options.ttl_steps),
      max_rows_(options.max_rows),
      max_deletions_per_stripe_(
          std::max<int64_t>(1, options.max_logged_deletions / options.num_stripes)),
      sketch_width_(std::max<uint64_t>(
          64, static_cast<uint64_t>(options.admission_sketch_bytes) /
                  (static_cast<uint64_t>(options.num_stripes) * kSketchDepth))),
      initializer_(std::move(initializer)),
      row_budget_(options.row_budget),
      budget_name_(options.budget_name.empty() ? absl::StrCat("table '", options.name, "'")
                                               : options.budget_name),
      row_bytes_(static_cast<int64_t>(sizeof(float)) * options.dim *
                     (1 + optimizer.num_slots()) +
                 2 * static_cast<int64_t>(sizeof(uint32_t)) + kIndexBytesPerRow),
      held_(new std::atomic<bool>[options.num_buckets]),
      stripes_(new Stripe[options.num_stripes]) {
  for (int s = 0; s < num_slots_; ++s) initial_slot_[s] = optimizer.initial_slot_value(s);
  for (int32_t b = 0; b < num_buckets_; ++b) held_[b].store(options.all_buckets);
  for (int32_t b : options.buckets) held_[b].store(true);
  for (int32_t b = 0; b < num_buckets_; ++b) {
    if (!held_[b].load()) continue;
    Stripe& s = stripes_[StripeOfBucket(b)];
    absl::MutexLock lock(&s.mu);
    ++s.held_buckets;
    total_held_.fetch_add(1);
  }
  if (admit_after_ > 1) {
    for (int32_t i = 0; i < num_stripes_; ++i) {
      absl::MutexLock lock(&stripes_[i].mu);
      stripes_[i].sketch.reset(new uint8_t[sketch_width_ * kSketchDepth]());
    }
  }
}

DynamicTable::~DynamicTable() {
  if (row_budget_ == nullptr) return;
  absl::MutexLock lock(&charge_mu_);
  row_budget_->Release(charged_rows_ * row_bytes_);
}

absl::Status DynamicTable::ChargeNewRows(int64_t candidates,
                                         const std::function<int64_t()>& count_missing,
                                         absl::string_view doing) {
  if (row_budget_ == nullptr || candidates == 0) return absl::OkStatus();
  absl::MutexLock lock(&charge_mu_);
  // Every candidate first (the common case: room to spare); then only those that are new.
  if (row_budget_->Reserve(candidates * row_bytes_, "").ok()) {
    charged_rows_ += candidates;
    return absl::OkStatus();
  }
  const int64_t missing = count_missing();
  if (missing == 0) return absl::OkStatus();
  const absl::Status reserved = row_budget_->Reserve(
      missing * row_bytes_,
      absl::StrCat(budget_name_, ": ", doing, " makes ", missing, " new rows of ", row_bytes_,
                   " bytes (the table has ", size(), "; without max_rows each row counts in "
                   "the ps' memory budget, and a key without a row is refused past it)"));
  if (!reserved.ok()) return reserved;
  charged_rows_ += missing;
  return absl::OkStatus();
}

void DynamicTable::SettleCharge() {
  if (row_budget_ == nullptr) return;
  absl::MutexLock lock(&charge_mu_);
  const int64_t rows = size();
  if (rows < charged_rows_) {
    row_budget_->Release((charged_rows_ - rows) * row_bytes_);
  } else if (rows > charged_rows_) {
    // Rows made that no reservation covered (pushes that raced): counted as they are.
    row_budget_->Charge((rows - charged_rows_) * row_bytes_);
  }
  charged_rows_ = rows;
}

absl::StatusOr<std::unique_ptr<DynamicTable>> DynamicTable::Create(
    const DynamicTableOptions& options, const Optimizer& optimizer) {
  const std::string table = absl::StrCat("table '", options.name, "': ");
  if (options.name.empty()) return absl::InvalidArgumentError("dynamic table: name is empty");
  if (options.dim <= 0 || options.dim > (int64_t{1} << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "dim must be in [1, 1048576], got ", options.dim));
  }
  if (options.num_buckets <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "num_buckets must be > 0, got ", options.num_buckets));
  }
  if (options.num_stripes <= 0 || options.num_stripes > 65536) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "num_stripes must be in [1, 65536], got ", options.num_stripes));
  }
  for (int32_t b : options.buckets) {
    if (b < 0 || b >= options.num_buckets) {
      return absl::InvalidArgumentError(absl::StrCat(table, "bucket ", b, " is outside [0, ",
                                                     options.num_buckets, ")"));
    }
  }
  if (options.admit_after < 0 || options.admit_after > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "admit_after must be in [0, 255], got ", options.admit_after));
  }
  if (options.admit_after > 1 && options.admission_sketch_bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        table, "admission_sketch_bytes must be > 0, got ", options.admission_sketch_bytes));
  }
  if (options.ttl_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "ttl_steps must be >= 0, got ", options.ttl_steps));
  }
  if (options.max_rows < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "max_rows must be >= 0, got ", options.max_rows));
  }
  if (options.max_logged_deletions < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        table, "max_logged_deletions must be >= 0, got ", options.max_logged_deletions));
  }
  auto init = KeyedRowInitializer::Create(options.initializer, options.name, options.dim);
  if (!init.ok()) return init.status();
  return std::unique_ptr<DynamicTable>(new DynamicTable(options, *std::move(init), optimizer));
}

int32_t DynamicTable::StripeOfBucket(int32_t bucket) const {
  return static_cast<int32_t>(Mix64(static_cast<uint64_t>(bucket) ^ kStripeSalt) %
                              static_cast<uint64_t>(num_stripes_));
}

absl::Status DynamicTable::CheckHeld(absl::Span<const int64_t> keys,
                                     std::vector<KeyPlace>* places) const {
  places->resize(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    const int32_t bucket = BucketOf(keys[k], num_buckets_);
    if (!held_[bucket].load(std::memory_order_acquire)) {
      return absl::FailedPreconditionError(
          absl::StrCat("table '", name_, "': key ", keys[k], " (position ", k, ") is in bucket ",
                       bucket, ", which this table does not hold"));
    }
    (*places)[k] = {StripeOfBucket(bucket), bucket};
  }
  return absl::OkStatus();
}

// Positions 0..n-1 grouped by stripe (counting sort), and where each stripe's group begins.
static void GroupByStripe(absl::Span<const int32_t> stripe_of, int32_t num_stripes,
                          std::vector<uint32_t>* order, std::vector<uint32_t>* begin) {
  begin->assign(num_stripes + 1, 0);
  for (int32_t s : stripe_of) ++(*begin)[s + 1];
  for (int32_t s = 0; s < num_stripes; ++s) (*begin)[s + 1] += (*begin)[s];
  std::vector<uint32_t> next(begin->begin(), begin->end() - 1);
  order->resize(stripe_of.size());
  for (size_t k = 0; k < stripe_of.size(); ++k) (*order)[next[stripe_of[k]]++] = k;
}

absl::Status DynamicTable::Pull(absl::Span<const int64_t> keys, absl::Span<float> out) const {
  if (out.size() != keys.size() * static_cast<size_t>(dim_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", name_, "': pull of ", keys.size(), " keys of dim ", dim_,
                     " needs ", keys.size() * dim_, " floats, got ", out.size()));
  }
  std::vector<KeyPlace> places;
  RETURN_IF_ERROR(CheckHeld(keys, &places));
  std::vector<int32_t> stripe_of(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) stripe_of[k] = places[k].stripe;
  std::vector<uint32_t> order, begin;
  GroupByStripe(stripe_of, num_stripes_, &order, &begin);
  std::vector<uint32_t> missing;
  for (int32_t s = 0; s < num_stripes_; ++s) {
    if (begin[s] == begin[s + 1]) continue;
    const Stripe& stripe = stripes_[s];
    absl::ReaderMutexLock lock(&stripe.mu);
    for (uint32_t i = begin[s]; i < begin[s + 1]; ++i) {
      const uint32_t k = order[i];
      const int64_t row = stripe.Find(keys[k]);
      if (row < 0) {
        missing.push_back(k);
      } else {
        std::memcpy(out.data() + k * dim_, stripe.Param(static_cast<uint32_t>(row), dim_),
                    dim_ * sizeof(float));
      }
    }
  }
  for (uint32_t k : missing) initializer_.Fill(keys[k], out.data() + k * dim_);
  return absl::OkStatus();
}

uint32_t DynamicTable::NewRow(Stripe& s, int64_t key, uint32_t last_step) {
  s.mu.AssertHeld();
  uint32_t row;
  if (!s.free_rows.empty()) {
    row = s.free_rows.back();
    s.free_rows.pop_back();
  } else {
    row = s.next_row++;
    if ((row >> kChunkShift) >= s.chunks.size()) {
      const size_t floats = static_cast<size_t>(kChunkRows * dim_);
      const size_t bytes = floats * sizeof(float) * (1 + num_slots_) +
                           2 * kChunkRows * sizeof(uint32_t);
      s.chunks.emplace_back(bytes);
      const Mapped& c = s.chunks.back();
      s.param_blocks.push_back(c.as<float>());
      for (int j = 0; j < num_slots_; ++j) {
        s.slot_blocks[j].push_back(c.as<float>((j + 1) * floats * sizeof(float)));
      }
      const size_t meta = (1 + num_slots_) * floats * sizeof(float);
      s.step_blocks.push_back(c.as<uint32_t>(meta));
      s.epoch_blocks.push_back(c.as<uint32_t>(meta + kChunkRows * sizeof(uint32_t)));
    }
  }
  s.Insert(key, row);
  initializer_.Fill(key, s.Param(row, dim_));
  for (int j = 0; j < num_slots_; ++j) {
    std::fill_n(s.Slot(j, row, dim_), dim_, initial_slot_[j]);
  }
  s.Step(row) = last_step;
  s.Epoch(row) = epoch();
  ++s.created;
  total_rows_.fetch_add(1, std::memory_order_relaxed);
  return row;
}

void DynamicTable::LogDeletion(Stripe& s, int64_t key) {
  s.mu.AssertHeld();
  if (static_cast<int64_t>(s.deletions.size()) >= max_deletions_per_stripe_) {
    s.deletions.clear();
    s.deletions.shrink_to_fit();
    s.deletions_lost_through = epoch();
  }
  s.deletions.push_back({key, epoch()});
}

void DynamicTable::RemoveRow(Stripe& s, int64_t key, uint32_t row, int64_t* counter) {
  s.mu.AssertHeld();
  s.Erase(key);
  s.free_rows.push_back(row);
  LogDeletion(s, key);
  ++*counter;
  total_rows_.fetch_sub(1, std::memory_order_relaxed);
}

// Evicts up to `limit` rows whose last push is before `threshold`.
int64_t DynamicTable::EvictOlderThan(Stripe& s, uint32_t threshold, int64_t limit,
                                     int64_t* counter, RowBatch* evicted) {
  s.mu.AssertHeld();
  std::vector<std::pair<int64_t, uint32_t>> victims;
  s.ForEach([&](int64_t key, uint32_t row) {
    s.mu.AssertReaderHeld();  // ForEach calls back under the lock the analysis cannot follow
    if (static_cast<int64_t>(victims.size()) < limit && s.Step(row) < threshold) {
      victims.push_back({key, row});
    }
  });
  for (const auto& [key, row] : victims) {
    if (evicted != nullptr) CopyRow(s, key, row, evicted);
    RemoveRow(s, key, row, counter);
  }
  return static_cast<int64_t>(victims.size());
}

void DynamicTable::EvictForBudget(Stripe& s, uint32_t now, RowBatch* evicted) {
  s.mu.AssertHeld();
  if (max_rows_ == 0 || s.size == 0) return;
  // Each stripe keeps to its share of max_rows (by the buckets it holds: keys hash uniformly
  // into buckets), down to its share less a batch, so that sweeps are amortized over many
  // creations.
  const int64_t held = std::max<int32_t>(1, total_held_.load(std::memory_order_relaxed));
  const int64_t budget = max_rows_ * s.held_buckets / held;
  if (s.size <= budget) return;
  const int64_t want = std::min<int64_t>(s.size, s.size - budget + budget / 256);
  // The want/size quantile of the last-push steps of sampled rows.
  std::vector<uint32_t> sample;
  const uint64_t stride = std::max<uint64_t>(1, s.capacity / kEvictionSamples);
  const uint32_t* rows = s.Rows();
  for (uint64_t i = 0; i < s.capacity; i += stride) {
    if (rows[i] != 0) sample.push_back(s.Step(rows[i] - 1));
  }
  // Rows older than the quantile first, then those at it, then (if still over) any row
  // older than this push, so that ties at the quantile do not spare older rows.
  uint32_t quantile = now;
  if (!sample.empty()) {
    const size_t q = std::min(sample.size() - 1,
                              static_cast<size_t>(static_cast<double>(want) / s.size *
                                                  static_cast<double>(sample.size())));
    std::nth_element(sample.begin(), sample.begin() + q, sample.end());
    quantile = std::min(now, sample[q]);
  }
  int64_t done = 0;
  for (uint32_t threshold : {quantile, std::min(now, quantile + 1), now}) {
    if (done >= want) break;
    done += EvictOlderThan(s, threshold, want - done, &s.evicted_budget, evicted);
  }
}

bool DynamicTable::Admit(Stripe& s, int64_t key) {
  s.mu.AssertHeld();
  if (admit_after_ <= 1) return true;
  const uint64_t h = Mix64(static_cast<uint64_t>(key) ^ kIndexSalt ^ kSketchSalt);
  const uint64_t h1 = h & 0xFFFFFFFFu, h2 = (h >> 32) | 1;
  uint8_t* counters[kSketchDepth];
  uint8_t low = 255;
  for (int d = 0; d < kSketchDepth; ++d) {
    counters[d] = &s.sketch[d * sketch_width_ + (h1 + d * h2) % sketch_width_];
    low = std::min(low, *counters[d]);
  }
  if (low < 255) {
    for (uint8_t* c : counters) {
      if (*c == low) ++*c;  // conservative update
    }
    ++low;
  }
  if (++s.sketch_increments >= 8 * sketch_width_) {
    for (uint64_t i = 0; i < sketch_width_ * kSketchDepth; ++i) s.sketch[i] >>= 1;
    s.sketch_increments = 0;
  }
  return low >= admit_after_;
}

namespace {

// The distinct keys of a push in order of first appearance (*first: the position in `keys`
// of each), and their gradients (*sums, dim floats each), duplicates' summed in order.
void SumByKey(absl::Span<const int64_t> keys, absl::Span<const float> grads, int64_t dim,
              std::vector<uint32_t>* first, std::vector<float>* sums) {
  absl::flat_hash_map<int64_t, uint32_t> position;
  position.reserve(keys.size());
  sums->reserve(grads.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    auto [it, inserted] = position.try_emplace(keys[k], static_cast<uint32_t>(first->size()));
    const float* g = grads.data() + k * dim;
    if (inserted) {
      first->push_back(static_cast<uint32_t>(k));
      sums->insert(sums->end(), g, g + dim);
    } else {
      float* sum = sums->data() + static_cast<size_t>(it->second) * dim;
      for (int64_t c = 0; c < dim; ++c) sum[c] += g[c];
    }
  }
}

}  // namespace

absl::Status DynamicTable::CheckPush(absl::Span<const int64_t> keys,
                                     absl::Span<const float> grads, const Optimizer& optimizer,
                                     int64_t step, double lr_scale) const {
  const std::string table = absl::StrCat("table '", name_, "': ");
  if (grads.size() != keys.size() * static_cast<size_t>(dim_)) {
    return absl::InvalidArgumentError(absl::StrCat(table, "push of ", keys.size(),
                                                   " keys of dim ", dim_, " needs ",
                                                   keys.size() * dim_, " gradient floats, got ",
                                                   grads.size()));
  }
  if (optimizer.num_slots() != num_slots_) {
    return absl::InvalidArgumentError(absl::StrCat(table, "the optimizer has ",
                                                   optimizer.num_slots(),
                                                   " slots, the table was made for ", num_slots_));
  }
  if (step < 1) {
    return absl::InvalidArgumentError(absl::StrCat(table, "step must be >= 1, got ", step));
  }
  if (!(lr_scale > 0) || !std::isfinite(lr_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat(table, "lr_scale must be > 0 and finite, got ", lr_scale));
  }
  const int64_t bad = FirstNonFinite(grads.data(), static_cast<int64_t>(grads.size()));
  if (bad < static_cast<int64_t>(grads.size())) {
    return absl::InvalidArgumentError(absl::StrCat(table, "gradient of key ", keys[bad / dim_],
                                                   " (position ", bad / dim_,
                                                   ") is not finite: ", grads[bad]));
  }
  return absl::OkStatus();
}

absl::StatusOr<DynamicPushResult> DynamicTable::Push(absl::Span<const int64_t> keys,
                                                     absl::Span<const float> grads,
                                                     const Optimizer& optimizer, int64_t step,
                                                     double lr_scale, RowBatch* evicted) {
  RETURN_IF_ERROR(CheckPush(keys, grads, optimizer, step, lr_scale));
  std::vector<KeyPlace> places;
  RETURN_IF_ERROR(CheckHeld(keys, &places));

  // Distinct keys in order of first appearance, duplicates' gradients summed in order.
  std::vector<uint32_t> first;  // position in `keys` of each distinct key
  std::vector<float> sums;
  SumByKey(keys, grads, dim_, &first, &sums);
  std::vector<int32_t> stripe_of(first.size());
  for (size_t u = 0; u < first.size(); ++u) stripe_of[u] = places[first[u]].stripe;
  std::vector<uint32_t> order, begin;
  GroupByStripe(stripe_of, num_stripes_, &order, &begin);
  // Before anything changes: the update must leave every row finite, and the rows it makes
  // must fit in the row budget.
  RETURN_IF_ERROR(
      CheckFiniteUpdate(keys, first, sums, order, begin, optimizer, step, lr_scale));
  RETURN_IF_ERROR(ChargeNewRows(
      static_cast<int64_t>(first.size()),
      [&] {
        int64_t missing = 0;
        for (int32_t si = 0; si < num_stripes_; ++si) {
          if (begin[si] == begin[si + 1]) continue;
          const Stripe& s = stripes_[si];
          absl::ReaderMutexLock lock(&s.mu);
          for (uint32_t i = begin[si]; i < begin[si + 1]; ++i) {
            if (s.Find(keys[first[order[i]]]) < 0) ++missing;
          }
        }
        return missing;
      },
      absl::StrCat("a push of ", first.size(), " keys at step ", step)));

  DynamicPushResult result;
  const uint32_t now = StepStamp(step);
  std::vector<int64_t> rows;
  std::vector<float> grad_rows;
  for (int32_t si = 0; si < num_stripes_; ++si) {
    if (begin[si] == begin[si + 1]) continue;
    Stripe& s = stripes_[si];
    absl::MutexLock lock(&s.mu);
    rows.clear();
    grad_rows.clear();
    for (uint32_t i = begin[si]; i < begin[si + 1]; ++i) {
      const uint32_t u = order[i];
      const int64_t key = keys[first[u]];
      if (!held_[places[first[u]].bucket].load(std::memory_order_acquire)) {
        ++result.not_held;
        continue;
      }
      int64_t row = s.Find(key);
      if (row < 0) {
        if (!Admit(s, key)) {
          ++s.denied;
          ++result.denied;
          continue;
        }
        row = NewRow(s, key, now);
        ++result.created;
      }
      rows.push_back(row);
      const float* g = sums.data() + static_cast<size_t>(u) * dim_;
      grad_rows.insert(grad_rows.end(), g, g + dim_);
    }
    if (!rows.empty()) {
      ApplyToRows(s, rows, grad_rows, optimizer, step, lr_scale, now);
      result.applied += static_cast<int64_t>(rows.size());
    }
    EvictAfterPush(s, now, evicted);
  }
  SettleCharge();
  return result;
}

absl::Status DynamicTable::CheckFiniteUpdate(absl::Span<const int64_t> keys,
                                             const std::vector<uint32_t>& first,
                                             const std::vector<float>& sums,
                                             const std::vector<uint32_t>& order,
                                             const std::vector<uint32_t>& begin,
                                             const Optimizer& optimizer, int64_t step,
                                             double lr_scale) const {
  // Per stripe: its rows in place, and the keys without a row from their initial values
  // (contiguous copies), each checked with one call.
  std::vector<int64_t> rows, fresh_index;
  std::vector<uint32_t> row_u, fresh_u;
  std::vector<float> row_grads, fresh_grads, fresh_params;
  std::vector<float> fresh_slots[Optimizer::kMaxSlots];
  auto refuse = [&](uint32_t u, int64_t column) {
    const float g = sums[static_cast<size_t>(u) * dim_ + column];
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", name_, "': update ", step, " would make the row of key ", keys[first[u]],
        " (position ", first[u], ", element ", column,
        ") non-finite in its parameters or an optimizer slot (the gradient there is ", g,
        "); refused, the table is unchanged"));
  };
  for (int32_t si = 0; si < num_stripes_; ++si) {
    if (begin[si] == begin[si + 1]) continue;
    const Stripe& s = stripes_[si];
    absl::ReaderMutexLock lock(&s.mu);
    rows.clear();
    row_u.clear();
    row_grads.clear();
    fresh_u.clear();
    fresh_grads.clear();
    for (uint32_t i = begin[si]; i < begin[si + 1]; ++i) {
      const uint32_t u = order[i];
      const float* g = sums.data() + static_cast<size_t>(u) * dim_;
      const int64_t row = s.Find(keys[first[u]]);
      if (row >= 0) {
        rows.push_back(row);
        row_u.push_back(u);
        row_grads.insert(row_grads.end(), g, g + dim_);
      } else {
        fresh_u.push_back(u);
        fresh_grads.insert(fresh_grads.end(), g, g + dim_);
      }
    }
    if (!rows.empty()) {
      const RowBlocks params{s.param_blocks.data(), kChunkShift, dim_};
      RowBlocks slots[Optimizer::kMaxSlots] = {};
      for (int j = 0; j < num_slots_; ++j) slots[j] = {s.slot_blocks[j].data(), kChunkShift, dim_};
      const int64_t bad = optimizer.FirstNonFiniteRows(step, lr_scale, rows, row_grads.data(),
                                                       params,
                                                       absl::MakeConstSpan(slots, num_slots_));
      if (bad < static_cast<int64_t>(rows.size()) * dim_) {
        return refuse(row_u[bad / dim_], bad % dim_);
      }
    }
    if (!fresh_u.empty()) {
      const size_t n = fresh_u.size() * static_cast<size_t>(dim_);
      fresh_params.resize(n);
      for (size_t k = 0; k < fresh_u.size(); ++k) {
        initializer_.Fill(keys[first[fresh_u[k]]], fresh_params.data() + k * dim_);
      }
      const float* slot_ptrs[Optimizer::kMaxSlots] = {};
      for (int j = 0; j < num_slots_; ++j) {
        fresh_slots[j].assign(n, initial_slot_[j]);
        slot_ptrs[j] = fresh_slots[j].data();
      }
      const int64_t bad = optimizer.FirstNonFiniteDense(
          step, lr_scale, fresh_grads, fresh_params.data(),
          absl::Span<const float* const>(slot_ptrs, num_slots_));
      if (bad < static_cast<int64_t>(n)) return refuse(fresh_u[bad / dim_], bad % dim_);
    }
  }
  return absl::OkStatus();
}

void DynamicTable::ApplyToRows(Stripe& s, const std::vector<int64_t>& rows,
                               const std::vector<float>& grad_rows, const Optimizer& optimizer,
                               int64_t step, double lr_scale, uint32_t now) {
  s.mu.AssertHeld();
  const RowBlocks params{s.param_blocks.data(), kChunkShift, dim_};
  RowBlocks slots[Optimizer::kMaxSlots] = {};
  for (int j = 0; j < num_slots_; ++j) slots[j] = {s.slot_blocks[j].data(), kChunkShift, dim_};
  optimizer.ApplyRowsScaled(step, lr_scale, rows, grad_rows.data(), params,
                            absl::MakeConstSpan(slots, num_slots_));
  const uint32_t e = epoch();
  for (int64_t r : rows) {
    s.Step(static_cast<uint32_t>(r)) = now;
    s.Epoch(static_cast<uint32_t>(r)) = e;
  }
}

void DynamicTable::EvictAfterPush(Stripe& s, uint32_t now, RowBatch* evicted) {
  s.mu.AssertHeld();
  s.newest_step = std::max(s.newest_step, now);
  if (ttl_steps_ > 0 && s.newest_step > ttl_steps_ &&
      s.newest_step - s.last_ttl_sweep >= std::max<int64_t>(1, ttl_steps_ / 4)) {
    s.last_ttl_sweep = s.newest_step;
    EvictOlderThan(s, static_cast<uint32_t>(s.newest_step - ttl_steps_),
                   std::numeric_limits<int64_t>::max(), &s.evicted_ttl, evicted);
  }
  EvictForBudget(s, now, evicted);
}

int64_t DynamicTable::EvictExpired(int64_t now_step) {
  if (ttl_steps_ == 0 || now_step <= ttl_steps_) return 0;
  const uint32_t threshold = StepStamp(now_step - ttl_steps_);
  int64_t evicted = 0;
  for (int32_t i = 0; i < num_stripes_; ++i) {
    Stripe& s = stripes_[i];
    absl::MutexLock lock(&s.mu);
    evicted += EvictOlderThan(s, threshold, std::numeric_limits<int64_t>::max(), &s.evicted_ttl,
                              nullptr);
  }
  SettleCharge();
  return evicted;
}

bool DynamicTable::HoldsBucket(int32_t bucket) const {
  return bucket >= 0 && bucket < num_buckets_ && held_[bucket].load(std::memory_order_acquire);
}

std::vector<int32_t> DynamicTable::HeldBuckets() const {
  std::vector<int32_t> out;
  for (int32_t b = 0; b < num_buckets_; ++b) {
    if (held_[b].load(std::memory_order_acquire)) out.push_back(b);
  }
  return out;
}

void DynamicTable::CopyRow(const Stripe& s, int64_t key, uint32_t row, RowBatch* out) const {
  s.mu.AssertReaderHeld();
  out->keys.push_back(key);
  out->last_steps.push_back(s.Step(row));
  const float* p = s.Param(row, dim_);
  out->values.insert(out->values.end(), p, p + dim_);
  for (int j = 0; j < num_slots_; ++j) {
    const float* v = s.Slot(j, row, dim_);
    out->values.insert(out->values.end(), v, v + dim_);
  }
}

absl::StatusOr<RowBatch> DynamicTable::ExportBuckets(absl::Span<const int32_t> buckets,
                                                     uint32_t since_epoch) const {
  std::vector<bool> wanted(num_buckets_, false);
  std::vector<bool> stripe_wanted(num_stripes_, false);
  for (int32_t b : buckets) {
    if (!HoldsBucket(b)) {
      return absl::FailedPreconditionError(
          absl::StrCat("table '", name_, "': bucket ", b, " is not held"));
    }
    wanted[b] = true;
    stripe_wanted[StripeOfBucket(b)] = true;
  }
  RowBatch out;
  for (int32_t i = 0; i < num_stripes_; ++i) {
    if (!stripe_wanted[i]) continue;
    const Stripe& s = stripes_[i];
    absl::ReaderMutexLock lock(&s.mu);
    s.ForEach([&](int64_t key, uint32_t row) {
      s.mu.AssertReaderHeld();
      if (wanted[BucketOf(key, num_buckets_)] && s.Epoch(row) > since_epoch) {
        CopyRow(s, key, row, &out);
      }
    });
  }
  return out;
}

absl::StatusOr<std::vector<int64_t>> DynamicTable::DeletedInBuckets(
    absl::Span<const int32_t> buckets, uint32_t since) const {
  ASSIGN_OR_RETURN(std::vector<int64_t> deleted, DeletedSince(since));
  std::vector<bool> wanted(num_buckets_, false);
  for (int32_t b : buckets) {
    if (b >= 0 && b < num_buckets_) wanted[b] = true;
  }
  std::vector<int64_t> out;
  for (int64_t key : deleted) {
    if (wanted[BucketOf(key, num_buckets_)]) out.push_back(key);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

void DynamicTable::RestampBuckets(absl::Span<const int32_t> buckets) {
  std::vector<bool> wanted(num_buckets_, false);
  std::vector<bool> stripe_wanted(num_stripes_, false);
  for (int32_t b : buckets) {
    if (b < 0 || b >= num_buckets_) continue;
    wanted[b] = true;
    stripe_wanted[StripeOfBucket(b)] = true;
  }
  const uint32_t now = epoch();
  for (int32_t i = 0; i < num_stripes_; ++i) {
    if (!stripe_wanted[i]) continue;
    Stripe& s = stripes_[i];
    absl::MutexLock lock(&s.mu);
    s.ForEach([&](int64_t key, uint32_t row) {
      s.mu.AssertHeld();
      if (wanted[BucketOf(key, num_buckets_)]) s.Epoch(row) = now;
    });
  }
}

absl::Status DynamicTable::CheckBatch(const RowBatch& rows) const {
  const size_t n = rows.keys.size();
  if (rows.last_steps.size() != n || rows.values.size() != n * row_floats()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", name_, "': a batch of ", n, " keys needs ", n, " last_steps and ",
        n * row_floats(), " values (dim ", dim_, ", ", num_slots_, " slots), got ",
        rows.last_steps.size(), " and ", rows.values.size()));
  }
  const int64_t bad = FirstNonFinite(rows.values.data(), static_cast<int64_t>(rows.values.size()));
  if (bad < static_cast<int64_t>(rows.values.size())) {
    return absl::InvalidArgumentError(absl::StrCat("table '", name_, "': key ",
                                                   rows.keys[bad / row_floats()], " (position ",
                                                   bad / row_floats(), ") has a non-finite value"));
  }
  absl::flat_hash_set<int64_t> seen;
  seen.reserve(n);
  for (size_t k = 0; k < n; ++k) {
    if (!seen.insert(rows.keys[k]).second) {
      return absl::InvalidArgumentError(absl::StrCat("table '", name_, "': key ", rows.keys[k],
                                                     " (position ", k, ") repeats in the batch"));
    }
  }
  return absl::OkStatus();
}

void DynamicTable::WriteRow(Stripe& s, int64_t key, const float* values, uint32_t last_step) {
  s.mu.AssertHeld();
  int64_t row = s.Find(key);
  if (row < 0) {
    row = NewRow(s, key, last_step);
    --s.created;  // restored or moved, not created by training
  }
  const uint32_t r = static_cast<uint32_t>(row);
  std::memcpy(s.Param(r, dim_), values, dim_ * sizeof(float));
  for (int j = 0; j < num_slots_; ++j) {
    std::memcpy(s.Slot(j, r, dim_), values + (j + 1) * dim_, dim_ * sizeof(float));
  }
  s.Step(r) = last_step;
  s.Epoch(r) = epoch();
}

absl::Status DynamicTable::ImportBuckets(absl::Span<const int32_t> buckets,
                                         const RowBatch& rows) {
  std::vector<bool> importing(num_buckets_, false);
  for (int32_t b : buckets) {
    if (b < 0 || b >= num_buckets_) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", name_, "': bucket ", b, " is outside [0, ", num_buckets_, ")"));
    }
    if (HoldsBucket(b)) {
      return absl::FailedPreconditionError(
          absl::StrCat("table '", name_, "': bucket ", b, " is already held"));
    }
    importing[b] = true;
  }
  RETURN_IF_ERROR(CheckBatch(rows));
  std::vector<int32_t> stripe_of(rows.keys.size());
  for (size_t k = 0; k < rows.keys.size(); ++k) {
    const int32_t b = BucketOf(rows.keys[k], num_buckets_);
    if (!importing[b]) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", name_, "': key ", rows.keys[k], " (position ", k,
                       ") is in bucket ", b, ", which is not being imported"));
    }
    stripe_of[k] = StripeOfBucket(b);
  }
  // The buckets are not held: every row is new (keys repeated in a batch overwrite).
  RETURN_IF_ERROR(ChargeNewRows(
      static_cast<int64_t>(rows.keys.size()),
      [&] {
        return static_cast<int64_t>(
            absl::flat_hash_set<int64_t>(rows.keys.begin(), rows.keys.end()).size());
      },
      absl::StrCat("importing ", buckets.size(), " buckets")));
  std::vector<uint32_t> order, begin;
  GroupByStripe(stripe_of, num_stripes_, &order, &begin);
  std::vector<std::vector<int32_t>> stripe_buckets(num_stripes_);
  for (int32_t b : buckets) stripe_buckets[StripeOfBucket(b)].push_back(b);
  for (int32_t i = 0; i < num_stripes_; ++i) {
    if (begin[i] == begin[i + 1] && stripe_buckets[i].empty()) continue;
    Stripe& s = stripes_[i];
    absl::MutexLock lock(&s.mu);
    for (uint32_t j = begin[i]; j < begin[i + 1]; ++j) {
      const uint32_t k = order[j];
      WriteRow(s, rows.keys[k], rows.values.data() + k * row_floats(), rows.last_steps[k]);
    }
    for (int32_t b : stripe_buckets[i]) held_[b].store(true, std::memory_order_release);
    s.held_buckets += static_cast<int32_t>(stripe_buckets[i].size());
    total_held_.fetch_add(static_cast<int32_t>(stripe_buckets[i].size()));
  }
  SettleCharge();
  return absl::OkStatus();
}

absl::Status DynamicTable::DropBuckets(absl::Span<const int32_t> buckets) {
  std::vector<bool> dropping(num_buckets_, false);
  std::vector<std::vector<int32_t>> stripe_buckets(num_stripes_);
  for (int32_t b : buckets) {
    if (!HoldsBucket(b)) {
      return absl::FailedPreconditionError(
          absl::StrCat("table '", name_, "': bucket ", b, " is not held"));
    }
    dropping[b] = true;
    stripe_buckets[StripeOfBucket(b)].push_back(b);
  }
  for (int32_t i = 0; i < num_stripes_; ++i) {
    if (stripe_buckets[i].empty()) continue;
    Stripe& s = stripes_[i];
    absl::MutexLock lock(&s.mu);
    for (int32_t b : stripe_buckets[i]) held_[b].store(false, std::memory_order_release);
    s.held_buckets -= static_cast<int32_t>(stripe_buckets[i].size());
    total_held_.fetch_sub(static_cast<int32_t>(stripe_buckets[i].size()));
    std::vector<std::pair<int64_t, uint32_t>> victims;
    s.ForEach([&](int64_t key, uint32_t row) {
      if (dropping[BucketOf(key, num_buckets_)]) victims.push_back({key, row});
    });
    for (const auto& [key, row] : victims) RemoveRow(s, key, row, &s.dropped);
  }
  SettleCharge();
  return absl::OkStatus();
}

absl::Status DynamicTable::ForEachChangedBatch(
    uint32_t since, const std::function<absl::Status(const RowBatch&)>& sink) const {
  for (int32_t i = 0; i < num_stripes_; ++i) {
    RowBatch batch;
    {
      const Stripe& s = stripes_[i];
      absl::ReaderMutexLock lock(&s.mu);
      s.ForEach([&](int64_t key, uint32_t row) {
        s.mu.AssertReaderHeld();
        if (s.Epoch(row) > since) CopyRow(s, key, row, &batch);
      });
    }
    if (!batch.keys.empty()) RETURN_IF_ERROR(sink(batch));
  }
  return absl::OkStatus();
}

int64_t DynamicTable::CountChanged(uint32_t since) const {
  int64_t n = 0;
  for (int32_t i = 0; i < num_stripes_; ++i) {
    const Stripe& s = stripes_[i];
    absl::ReaderMutexLock lock(&s.mu);
    s.ForEach([&](int64_t, uint32_t row) {
      s.mu.AssertReaderHeld();
      n += s.Epoch(row) > since ? 1 : 0;
    });
  }
  return n;
}

void DynamicTable::ForEachChangedRow(
    uint32_t since,
    const std::function<void(int64_t, uint32_t, const float* const*)>& visit) const {
  const float* values[1 + Optimizer::kMaxSlots] = {};
  for (int32_t i = 0; i < num_stripes_; ++i) {
    const Stripe& s = stripes_[i];
    absl::ReaderMutexLock lock(&s.mu);
    s.ForEach([&](int64_t key, uint32_t row) {
      s.mu.AssertReaderHeld();
      if (s.Epoch(row) <= since) return;
      values[0] = s.Param(row, dim_);
      for (int j = 0; j < num_slots_; ++j) values[1 + j] = s.Slot(j, row, dim_);
      visit(key, s.Step(row), values);
    });
  }
}

absl::StatusOr<std::vector<int64_t>> DynamicTable::DeletedSince(uint32_t since) const {
  std::vector<int64_t> out;
  for (int32_t i = 0; i < num_stripes_; ++i) {
    const Stripe& s = stripes_[i];
    absl::ReaderMutexLock lock(&s.mu);
    if (s.deletions_lost_through > since) {
      return absl::FailedPreconditionError(absl::StrCat(
          "table '", name_, "': deletions up to epoch ", s.deletions_lost_through,
          " were dropped (over ", max_deletions_per_stripe_,
          " in a stripe); an incremental checkpoint since epoch ", since,
          " is impossible, take a full one"));
    }
    for (const Stripe::Deletion& d : s.deletions) {
      if (d.epoch > since) out.push_back(d.key);
    }
  }
  return out;
}

void DynamicTable::ForgetDeletionsThrough(uint32_t through) {
  for (int32_t i = 0; i < num_stripes_; ++i) {
    Stripe& s = stripes_[i];
    absl::MutexLock lock(&s.mu);
    s.deletions.erase(std::remove_if(s.deletions.begin(), s.deletions.end(),
                                     [&](const Stripe::Deletion& d) { return d.epoch <= through; }),
                      s.deletions.end());
  }
}

absl::Status DynamicTable::UpsertRows(const RowBatch& rows) {
  RETURN_IF_ERROR(CheckBatch(rows));
  std::vector<KeyPlace> places;
  RETURN_IF_ERROR(CheckHeld(rows.keys, &places));
  std::vector<int32_t> stripe_of(rows.keys.size());
  for (size_t k = 0; k < rows.keys.size(); ++k) stripe_of[k] = places[k].stripe;
  std::vector<uint32_t> order, begin;
  GroupByStripe(stripe_of, num_stripes_, &order, &begin);
  RETURN_IF_ERROR(ChargeNewRows(
      static_cast<int64_t>(rows.keys.size()),
      [&] {
        absl::flat_hash_set<int64_t> missing;
        for (size_t k = 0; k < rows.keys.size(); ++k) {
          const Stripe& s = stripes_[places[k].stripe];
          absl::ReaderMutexLock lock(&s.mu);
          if (s.Find(rows.keys[k]) < 0) missing.insert(rows.keys[k]);
        }
        return static_cast<int64_t>(missing.size());
      },
      absl::StrCat("restoring ", rows.keys.size(), " rows")));
  for (int32_t i = 0; i < num_stripes_; ++i) {
    if (begin[i] == begin[i + 1]) continue;
    Stripe& s = stripes_[i];
    absl::MutexLock lock(&s.mu);
    for (uint32_t j = begin[i]; j < begin[i + 1]; ++j) {
      const uint32_t k = order[j];
      WriteRow(s, rows.keys[k], rows.values.data() + k * row_floats(), rows.last_steps[k]);
    }
  }
  SettleCharge();
  return absl::OkStatus();
}

absl::Status DynamicTable::EraseKeys(absl::Span<const int64_t> keys) {
  std::vector<KeyPlace> places;
  RETURN_IF_ERROR(CheckHeld(keys, &places));
  for (size_t k = 0; k < keys.size(); ++k) {
    Stripe& s = stripes_[places[k].stripe];
    absl::MutexLock lock(&s.mu);
    const int64_t row = s.Find(keys[k]);
    if (row >= 0) RemoveRow(s, keys[k], static_cast<uint32_t>(row), &s.dropped);
  }
  SettleCharge();
  return absl::OkStatus();
}

DynamicTableStats DynamicTable::stats() const {
  DynamicTableStats out;
  for (int32_t i = 0; i < num_stripes_; ++i) {
    const Stripe& s = stripes_[i];
    absl::ReaderMutexLock lock(&s.mu);
    out.rows += s.size;
    out.created += s.created;
    out.evicted_ttl += s.evicted_ttl;
    out.evicted_budget += s.evicted_budget;
    out.admission_denied += s.denied;
    out.dropped += s.dropped;
    out.index_bytes += static_cast<int64_t>(s.index_keys.bytes() + s.index_rows.bytes());
    for (const auto& c : s.chunks) out.arena_bytes += static_cast<int64_t>(c.bytes());
  }
  return out;
}

}  // namespace shardps
