#include "ps_server/shard_store.h"

#include <sched.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <limits>
#include <map>
#include <new>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "absl/base/config.h"
#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/finite.h"
#include "common/status_macros.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps_server/gradient_bytes.h"
#include "ps_server/initializer.h"
#include "ps_server/optimizer.h"
#include "ps_server/param_blocks.h"

// Tensors travel as raw little-endian float32 bytes, copied with memcpy.
#ifndef ABSL_IS_LITTLE_ENDIAN
#error "shardps' wire format (raw float32 bytes) assumes a little-endian host"
#endif

namespace shardps {
namespace {

// Bounds every element count so that products of dims, byte counts and global element
// indices stay far from int64 overflow (2^46 floats is 256 TiB).
constexpr int64_t kMaxElements = int64_t{1} << 46;

using FloatArray = Eigen::Map<Eigen::ArrayXf>;
using ConstFloatArray = Eigen::Map<const Eigen::ArrayXf>;

absl::Status Annotate(const absl::Status& status, absl::string_view prefix) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(prefix, ": ", status.message()));
}

std::string Quoted(absl::string_view shard) { return absl::StrCat("shard '", shard, "'"); }

// Runs large optimizer updates on several threads. An update is elementwise (dense) or
// row-wise over unique rows (sparse), and every piece is computed by the same correctly
// rounded loop with the same per-update coefficients, so a split update is bit-identical to
// an unsplit one. The caller claims pieces too, so it never waits behind another caller's
// work: at worst it computes every piece itself.
//
// Thread-safety: Run may be called from any number of threads at once.
class ParallelFor {
 public:
  explicit ParallelFor(int helpers) {
    for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { Loop(); });
  }
  ~ParallelFor() {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  // Calls fn(begin, end) for consecutive pieces covering [0, n), each at least `grain` long
  // (one piece, on this thread, when n < 2 * grain); returns when all have run. Inner
  // boundaries are multiples of `align` (pieces that write floats then do not share cache
  // lines).
  void Run(int64_t n, int64_t grain, int64_t align,
           absl::FunctionRef<void(int64_t, int64_t)> fn) {
    const int64_t pieces = std::min<int64_t>(static_cast<int64_t>(threads_.size()) + 1,
                                             n / std::max<int64_t>(grain, 1));
    if (pieces <= 1) {
      fn(0, n);
      return;
    }
    Job job(fn, n, pieces, align);
    {
      absl::MutexLock lock(&mu_);
      for (int64_t i = 1; i < pieces; ++i) queue_.push_back(&job);
    }
    job.Work();
    absl::MutexLock lock(&mu_);
    // Every piece is claimed; helpers that have not picked the job up never will.
    queue_.erase(std::remove(queue_.begin(), queue_.end(), &job), queue_.end());
    auto idle = [&job]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return job.users == 0; };
    mu_.Await(absl::Condition(&idle));
  }

 private:
  // One Run's pieces, on the caller's stack until every helper that took it has let go.
  struct Job {
    Job(absl::FunctionRef<void(int64_t, int64_t)> f, int64_t size, int64_t count, int64_t a)
        : fn(f), n(size), pieces(count), align(std::max<int64_t>(a, 1)) {}
    int64_t Boundary(int64_t i) const {
      return i == pieces ? n : n * i / pieces / align * align;
    }
    void Work() {
      for (int64_t i = next.fetch_add(1); i < pieces; i = next.fetch_add(1)) {
        fn(Boundary(i), Boundary(i + 1));
      }
    }
    const absl::FunctionRef<void(int64_t, int64_t)> fn;
    const int64_t n;
    const int64_t pieces;
    const int64_t align;
    std::atomic<int64_t> next{0};
    int users = 0;  // helpers inside Work(); guarded by ParallelFor::mu_
  };

  void Loop() {
    absl::MutexLock lock(&mu_);
    while (true) {
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      Job* job = queue_.front();
      queue_.pop_front();
      ++job->users;
      mu_.Unlock();
      job->Work();
      mu_.Lock();
      --job->users;
    }
  }

  absl::Mutex mu_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);  // one entry per helper a job asks for
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// CPUs this process may run on (what an affinity mask leaves of the machine).
int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return std::max(1, CPU_COUNT(&set));
}

// Updates smaller than this many floats per piece are not split: waking a helper costs more.
constexpr int64_t kParallelGrain = int64_t{1} << 17;

// Remembers the last `capacity` request ids of a shard, evicting the oldest first
// (TensorFlow's RecentRequestIds). Not thread-safe: guarded by the shard's mutex.
class RecentRequestIds {
 public:
  explicit RecentRequestIds(int64_t capacity) : capacity_(capacity) {}

  bool Contains(uint64_t id) const { return ids_.contains(id); }

  void Insert(uint64_t id) {
    if (capacity_ <= 0 || !ids_.insert(id).second) return;
    order_.push_back(id);
    if (static_cast<int64_t>(order_.size()) > capacity_) {
      ids_.erase(order_.front());
      order_.pop_front();
    }
  }

 private:
  const int64_t capacity_;
  absl::flat_hash_set<uint64_t> ids_;
  std::deque<uint64_t> order_;
};

// One replica's gradient for the SYNC step in progress. A replica contributes either dense
// pushes (row-range chunks that together cover the shard) or exactly one PushRows.
struct ReplicaGradient {
  enum class Kind { kNone, kDense, kRows };
  Kind kind = Kind::kNone;
  bool complete = false;
  // kDense: dense over the shard, allocated by the first chunk; covered[r] = row r arrived.
  std::vector<float> dense;
  std::vector<uint8_t> covered;
  int64_t covered_rows = 0;
  // kRows: unique ids in order of first appearance, and their (summed) rows.
  std::vector<int64_t> ids;
  std::vector<float> rows;
};

struct Waiter;
using WaiterList = std::multimap<int64_t, std::shared_ptr<Waiter>>;
using TimerList = std::multimap<absl::Time, std::shared_ptr<Waiter>>;

struct RowRange {
  int64_t begin;
  int64_t end;
  int64_t size() const { return end - begin; }
};

struct Geometry {
  int64_t rows;
  int64_t width;
};

// What a SYNC contribution did.
struct SyncResult {
  bool duplicate = false;  // nothing new: a re-run of the same (step, replica)
  bool applied = false;    // it completed the step, which was applied
};

// One shard: parameters, optimizer slots, version, request-id window, the SYNC step in
// progress and the pulls waiting for a version. The const fields never change after
// construction; the rest is guarded by `mu`.
struct Shard {
  Shard(const ShardSpec& shard_spec, Geometry g, std::unique_ptr<Optimizer> opt,
        int64_t id_window)
      : spec(shard_spec),
        rows(g.rows),
        width(g.width),
        size(g.rows * g.width),
        optimizer(std::move(opt)),
        sync(shard_spec.update().mode() == UpdateSpec::SYNC),
        num_replicas(sync ? shard_spec.update().num_replicas() : 0),
        bytes(static_cast<int64_t>(sizeof(float)) * size * (1 + optimizer->num_slots())),
        params(g.rows, g.width),
        recent_ids(id_window),
        replicas(static_cast<size_t>(num_replicas)) {
    for (int s = 0; s < optimizer->num_slots(); ++s) {
      slots.emplace_back(static_cast<size_t>(size), optimizer->initial_slot_value(s));
    }
  }

  const ShardSpec spec;
  const int64_t rows;
  const int64_t width;
  const int64_t size;  // rows * width floats
  const std::unique_ptr<const Optimizer> optimizer;
  const bool sync;
  const int num_replicas;  // SYNC only
  const int64_t bytes;     // parameters and slots

  absl::Mutex mu;
  ParamBlocks params ABSL_GUARDED_BY(mu);
  std::vector<std::vector<float>> slots ABSL_GUARDED_BY(mu);
  int64_t version ABSL_GUARDED_BY(mu) = 0;
  RecentRequestIds recent_ids ABSL_GUARDED_BY(mu);
  std::vector<ReplicaGradient> replicas ABSL_GUARDED_BY(mu);
  int complete_replicas ABSL_GUARDED_BY(mu) = 0;
  // Pulls waiting for a version, by min_version.
  WaiterList waiters ABSL_GUARDED_BY(mu);

  // Slot pointers at element `offset`.
  std::array<float*, Optimizer::kMaxSlots> SlotsAt(int64_t offset) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    std::array<float*, Optimizer::kMaxSlots> p{};
    for (size_t s = 0; s < slots.size(); ++s) p[s] = slots[s].data() + offset;
    return p;
  }
  absl::Span<float* const> SlotSpan(const std::array<float*, Optimizer::kMaxSlots>& p) const {
    return absl::Span<float* const>(p.data(), static_cast<size_t>(optimizer->num_slots()));
  }

  // Applies a dense gradient to `range` now, as one update, split over `parallel`'s threads
  // when large.
  // The gradient is read where it lies, run by run (GradientBytes::ForEachRun); a split
  // update is bit-identical to an unsplit one.
  void ApplyDense(RowRange range, const GradientBytes& grad, ParallelFor* parallel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const int64_t offset = range.begin * width;
    const int64_t step = version + 1;
    params.Writable(range.begin, range.end);
    parallel->Run(range.size() * width, kParallelGrain, /*align=*/16,
                  [&](int64_t begin, int64_t end) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    grad.ForEachRun(begin, end, [&](int64_t first, const float* g, int64_t n) {
                      ApplyDenseRun(step, offset + first, g, n);
                    });
                  });
    ++version;
  }

  // Applies grad[0, n) to parameter elements [first, first + n), block by block.
  // REQUIRES: those rows made Writable.
  void ApplyDenseRun(int64_t step, int64_t first, const float* grad, int64_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    params.ForEachRun(first, first + n, [&](int64_t e, float* p, int64_t m) {
      const auto s = SlotsAt(e);
      optimizer->ApplyDense(step, absl::MakeConstSpan(grad + (e - first), static_cast<size_t>(m)),
                            p, SlotSpan(s));
    });
  }

  // Applies row gradients (unique ids) now, as one update, split over `parallel`'s threads
  // when large.
  void ApplyRows(absl::Span<const int64_t> ids, const float* grad, ParallelFor* parallel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const auto s = SlotsAt(0);
    const int64_t step = version + 1;
    const RowBlocks rows_at = params.WritableRows(ids);
    parallel->Run(static_cast<int64_t>(ids.size()), std::max<int64_t>(1, kParallelGrain / width),
                  /*align=*/1, [&](int64_t begin, int64_t end) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                    optimizer->ApplyRows(step, ids.subspan(begin, end - begin),
                                         grad + begin * width, rows_at, SlotSpan(s));
                  });
    ++version;
  }

  // SYNC: checks that a push belongs to the step in progress.
  absl::Status CheckStep(int64_t step) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (step < version) {
      return absl::AbortedError(absl::StrCat("stale step ", step, ": ", Quoted(spec.name()),
                                             " is at version ", version));
    }
    if (step > version) {
      return absl::FailedPreconditionError(
          absl::StrCat("step ", step, " is ahead of ", Quoted(spec.name()), " at version ",
                       version, "; wait for the version (pull with min_version) first"));
    }
    return absl::OkStatus();
  }

  // SYNC: adds the rows of a dense chunk that this replica has not sent yet for the step.
  SyncResult AddDense(int replica, RowRange range, const GradientBytes& grad)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ReplicaGradient& rep = replicas[replica];
    if (rep.complete) return {true, false};
    if (rep.kind == ReplicaGradient::Kind::kNone) {
      rep.kind = ReplicaGradient::Kind::kDense;
      rep.dense.assign(static_cast<size_t>(size), 0.0f);
      rep.covered.assign(static_cast<size_t>(rows), 0);
    }
    int64_t added = 0;
    for (int64_t r = range.begin; r < range.end;) {
      if (rep.covered[r]) {
        ++r;
        continue;
      }
      int64_t run_end = r;
      while (run_end < range.end && !rep.covered[run_end]) rep.covered[run_end++] = 1;
      grad.CopyTo((r - range.begin) * width, (run_end - range.begin) * width,
                  rep.dense.data() + r * width);
      added += run_end - r;
      r = run_end;
    }
    if (added == 0) return {true, false};
    rep.covered_rows += added;
    if (rep.covered_rows == rows) return CompleteReplica(rep);
    return {};
  }

  // SYNC: records this replica's one PushRows for the step (ids unique).
  absl::StatusOr<SyncResult> AddRows(int replica, std::vector<int64_t> ids,
                                     std::vector<float> grad) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    ReplicaGradient& rep = replicas[replica];
    if (rep.complete) return SyncResult{true, false};
    if (rep.kind == ReplicaGradient::Kind::kDense) {
      return absl::FailedPreconditionError(absl::StrCat(
          "replica ", replica, " already pushed dense rows for step ", version, " of ",
          Quoted(spec.name()), "; a replica's step is either dense pushes or one PushRows"));
    }
    rep.kind = ReplicaGradient::Kind::kRows;
    rep.ids = std::move(ids);
    rep.rows = std::move(grad);
    return CompleteReplica(rep);
  }

  SyncResult CompleteReplica(ReplicaGradient& rep) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    rep.complete = true;
    if (++complete_replicas < num_replicas) return {};
    FinishStep();
    return {false, true};
  }

  // SYNC: sums the replicas' gradients in replica order 0..n-1 (a fixed order, so the result
  // does not depend on arrival order), applies the sum once and starts the next step.
  void FinishStep() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const bool rows_only =
        std::all_of(replicas.begin(), replicas.end(), [](const ReplicaGradient& r) {
          return r.kind == ReplicaGradient::Kind::kRows;
        });
    if (rows_only) {
      // Sparse: the union of the rows, sorted, each summed in replica order.
      std::vector<int64_t> ids;
      for (const ReplicaGradient& r : replicas) ids.insert(ids.end(), r.ids.begin(), r.ids.end());
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      absl::flat_hash_map<int64_t, int64_t> position;
      position.reserve(ids.size());
      for (size_t k = 0; k < ids.size(); ++k) position[ids[k]] = static_cast<int64_t>(k);
      std::vector<float> sum(ids.size() * static_cast<size_t>(width), 0.0f);
      for (const ReplicaGradient& r : replicas) {
        for (size_t k = 0; k < r.ids.size(); ++k) {
          FloatArray(sum.data() + position[r.ids[k]] * width, width) +=
              ConstFloatArray(r.rows.data() + k * width, width);
        }
      }
      if (!ids.empty()) {
        const auto s = SlotsAt(0);
        optimizer->ApplyRows(version + 1, ids, sum.data(), params.WritableRows(ids),
                             SlotSpan(s));
      }
    } else {
      std::vector<float> total;
      for (ReplicaGradient& r : replicas) {
        if (r.kind == ReplicaGradient::Kind::kDense && total.empty()) {
          total = std::move(r.dense);
          continue;
        }
        if (total.empty()) total.assign(static_cast<size_t>(size), 0.0f);
        if (r.kind == ReplicaGradient::Kind::kDense) {
          FloatArray(total.data(), size) += ConstFloatArray(r.dense.data(), size);
        } else {
          for (size_t k = 0; k < r.ids.size(); ++k) {
            FloatArray(total.data() + r.ids[k] * width, width) +=
                ConstFloatArray(r.rows.data() + k * width, width);
          }
        }
      }
      params.Writable(0, rows);
      ApplyDenseRun(version + 1, 0, total.data(), size);
    }
    ++version;
    // Frees the buffers: a fresh ReplicaGradient owns no memory.
    for (ReplicaGradient& r : replicas) r = ReplicaGradient();
    complete_replicas = 0;
  }
};

// A pull waiting for a version. Completed exactly once, by whoever wins Claim(): the update
// that reaches min_version (OK), the timer (DEADLINE_EXCEEDED) or Shutdown (CANCELLED). The
// winner removes it from the lists it is still in and calls `done` holding no store lock.
struct Waiter {
  std::shared_ptr<Shard> shard;
  int64_t min_version = 0;
  int64_t timeout_ms = 0;
  // Fills the response from the shard. REQUIRES: shard->mu held.
  std::function<void()> fill;
  ShardStore::DoneCallback done;
  std::atomic<bool> claimed{false};

  // Guarded by shard->mu.
  bool in_shard = false;
  WaiterList::iterator shard_it;
  // Guarded by the store's timer_mu_.
  bool in_timer = false;
  TimerList::iterator timer_it;

  bool Claim() { return !claimed.exchange(true, std::memory_order_acq_rel); }
};

// Removes waiters whose min_version the shard has reached, claims them and fills their
// responses (under the lock, so they see exactly this version).
void CollectReady(Shard& shard, std::vector<std::shared_ptr<Waiter>>* ready)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
  const auto end = shard.waiters.upper_bound(shard.version);
  for (auto it = shard.waiters.begin(); it != end;) {
    std::shared_ptr<Waiter> w = std::move(it->second);
    w->in_shard = false;
    it = shard.waiters.erase(it);
    if (w->Claim()) {
      w->fill();
      ready->push_back(std::move(w));
    }
  }
}

// The start of a mutating request, under the shard's lock: answers with the shard's version
// and, when the request id was already applied (a retry), marks the response a duplicate and
// returns true: the caller then changes nothing.
template <typename Response>
bool AnswerIfDuplicate(Shard& shard, uint64_t request_id, Response* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
  response->set_version(shard.version);
  if (!shard.recent_ids.Contains(request_id)) return false;
  response->set_duplicate(true);
  return true;
}

// The end of an accepted Push or PushRows: remembers its request id, answers with the
// shard's version and what happened, and collects the pulls that version releases.
template <typename Response>
void RecordUpdate(Shard& shard, uint64_t request_id, const SyncResult& result,
                  Response* response, std::vector<std::shared_ptr<Waiter>>* ready)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
  shard.recent_ids.Insert(request_id);
  response->set_version(shard.version);
  response->set_duplicate(result.duplicate);
  response->set_applied(result.applied);
  if (result.applied) CollectReady(shard, ready);
}

// Pull responses are filled in two halves so that the shard's lock covers only the memcpy:
// the caller sizes `data` first (outside the lock), then CopyRange or CopyRows copies under
// the lock and the filled string is swapped into the response. `data` starts as the
// response's own string, so a caller that recycles responses (the gRPC service pools them)
// lends its buffer: a pull of the same size then neither allocates nor zero-fills anything.
// A pull that fails leaves the response's data empty.

// The buffer a pull fills: the response's own string (its capacity, and its size when a
// recycled response last carried as many bytes), sized to `bytes` outside any lock.
std::string TakeBuffer(std::string* response_data, size_t bytes) {
  std::string data;
  data.swap(*response_data);
  data.resize(bytes);
  return data;
}

// The response's version and shape for a pull of `range`.
void FillRangeMeta(Shard& shard, RowRange range, PullResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
  response->set_version(shard.version);
  TensorShape* shape = response->mutable_shape();
  shape->clear_dim();
  const auto& dims = shard.spec.shape().dim();
  if (!dims.empty()) {
    shape->add_dim(range.size());
    for (int i = 1; i < dims.size(); ++i) shape->add_dim(dims[i]);
  }
}

// REQUIRES: data holds range.size() * width floats.
void CopyRange(Shard& shard, RowRange range, std::string* data, PullResponse* response)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
  shard.params.CopyOut(range.begin * shard.width, range.end * shard.width,
                       reinterpret_cast<float*>(&(*data)[0]));
  response->mutable_data()->swap(*data);
  FillRangeMeta(shard, range, response);
}

// As CopyRange, but the bytes stay in the shard's blocks: `in_place` gets views of them and
// references that keep them unchanged (ParamBlocks::Share); the response's data stays empty.
void ShareRange(Shard& shard, RowRange range, ShardStore::PulledBytes* in_place,
                PullResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
  shard.params.Share(range.begin * shard.width, range.end * shard.width, &in_place->pieces,
                     &in_place->holds);
  response->clear_data();
  FillRangeMeta(shard, range, response);
}


// REQUIRES: data holds ids.size() * width floats.
void CopyRows(Shard& shard, absl::Span<const int64_t> ids, std::string* data,
              PullRowsResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(shard.mu) {
  const size_t row_bytes = static_cast<size_t>(shard.width) * sizeof(float);
  char* out = &(*data)[0];
  for (size_t k = 0; k < ids.size(); ++k) {
    std::memcpy(out + k * row_bytes, shard.params.Row(ids[k]), row_bytes);
  }
  response->mutable_data()->swap(*data);
  response->set_version(shard.version);
}

absl::StatusOr<RowRange> ResolveRange(const Shard& shard, int64_t begin, int64_t end,
                                      absl::string_view what) {
  const int64_t resolved_end = end == 0 ? shard.rows : end;
  if (begin < 0 || begin >= resolved_end || resolved_end > shard.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": row range [", begin, ", ", end, ") is not within the shard's ", shard.rows,
        " rows (need 0 <= row_begin < row_end <= ", shard.rows, "; row_end 0 means the end)"));
  }
  return RowRange{begin, resolved_end};
}

// Numbers the distinct ids in order of first appearance: (*unique)[slot[k]] == ids[k].
// Returns whether any id repeats. REQUIRES: every id is in [0, rows).
//
// A row push of tens of thousands of random ids spent most of the ps' time in a hash map of
// every id (a fresh multi-MiB table per request, one cache miss per probe). When the shard's
// rows are few enough for a bitmap of them to be small next to the ids themselves, a bitmap
// finds the repeated ids instead, and only those go into a (small) hash map.
bool UniqueIds(absl::Span<const int64_t> ids, int64_t rows, std::vector<int64_t>* unique,
               std::vector<uint32_t>* slot) {
  const size_t n = ids.size();
  unique->clear();
  unique->reserve(n);
  slot->resize(n);
  auto number = [&](absl::flat_hash_map<int64_t, uint32_t>* first, size_t k) {
    const auto [it, inserted] =
        first->try_emplace(ids[k], static_cast<uint32_t>(unique->size()));
    if (inserted) unique->push_back(ids[k]);
    (*slot)[k] = it->second;
  };
  if (rows / 8 > static_cast<int64_t>(n * sizeof(int64_t)) * 8) {
    absl::flat_hash_map<int64_t, uint32_t> first;
    first.reserve(n);
    for (size_t k = 0; k < n; ++k) number(&first, k);
    return unique->size() < n;
  }
  std::vector<uint64_t> bits(static_cast<size_t>((rows + 63) / 64), 0);
  std::vector<int64_t> repeated;
  for (int64_t id : ids) {
    uint64_t& word = bits[static_cast<size_t>(id >> 6)];
    const uint64_t bit = uint64_t{1} << (id & 63);
    if (word & bit) repeated.push_back(id);
    word |= bit;
  }
  if (repeated.empty()) {
    unique->assign(ids.begin(), ids.end());
    for (size_t k = 0; k < n; ++k) (*slot)[k] = static_cast<uint32_t>(k);
    return false;
  }
  // Second pass: ids that never repeat are numbered directly, repeated ones through a map.
  std::fill(bits.begin(), bits.end(), 0);
  for (int64_t id : repeated) bits[static_cast<size_t>(id >> 6)] |= uint64_t{1} << (id & 63);
  absl::flat_hash_map<int64_t, uint32_t> first;
  first.reserve(repeated.size());
  for (size_t k = 0; k < n; ++k) {
    const int64_t id = ids[k];
    if (bits[static_cast<size_t>(id >> 6)] & (uint64_t{1} << (id & 63))) {
      number(&first, k);
    } else {
      (*slot)[k] = static_cast<uint32_t>(unique->size());
      unique->push_back(id);
    }
  }
  return true;
}

absl::Status CheckIds(const Shard& shard, absl::Span<const int64_t> ids, absl::string_view what) {
  for (size_t k = 0; k < ids.size(); ++k) {
    if (ids[k] < 0 || ids[k] >= shard.rows) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ids[", k, "] = ", ids[k],
                                                     " is out of range; the shard has ",
                                                     shard.rows, " rows"));
    }
  }
  return absl::OkStatus();
}

// Checks that `grad` holds exactly `floats` finite float32 values.
absl::Status CheckGradient(const GradientBytes& grad, int64_t floats, absl::string_view what,
                           absl::string_view field) {
  const int64_t expected = floats * static_cast<int64_t>(sizeof(float));
  if (grad.size_bytes() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, " has ", grad.size_bytes(),
                                                   " bytes, expected ", expected, " (", floats,
                                                   " float32 values)"));
  }
  const int64_t bad = grad.FirstNonFinite();
  if (bad < floats) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", field, "[", bad, "] is ",
                                                   grad.At(bad), "; values must be finite"));
  }
  return absl::OkStatus();
}

// As CheckGradient, for bytes in one buffer, and returns them as floats: viewed in place
// when aligned (the usual case) or copied into `scratch`.
absl::StatusOr<const float*> CheckedFloats(absl::string_view data, int64_t floats,
                                           absl::string_view what, absl::string_view field,
                                           std::vector<float>* scratch) {
  RETURN_IF_ERROR(CheckGradient(GradientBytes(data), floats, what, field));
  if (reinterpret_cast<uintptr_t>(data.data()) % alignof(float) == 0) {
    return reinterpret_cast<const float*>(data.data());
  }
  scratch->resize(static_cast<size_t>(floats));
  if (floats > 0) std::memcpy(scratch->data(), data.data(), data.size());
  return scratch->data();
}

absl::Status CheckRequestId(uint64_t request_id, absl::string_view what) {
  if (request_id == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": request_id must be non-zero (it detects retried requests)"));
  }
  return absl::OkStatus();
}

absl::Status CheckReplica(const Shard& shard, const SyncTag& tag, absl::string_view what) {
  if (tag.replica() < 0 || tag.replica() >= shard.num_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": sync.replica ", tag.replica(),
                                                   " is not in [0, ", shard.num_replicas, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckTimeout(int64_t timeout_ms, absl::string_view what) {
  if (timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": wait_timeout_ms must be >= 0, got ", timeout_ms));
  }
  return absl::OkStatus();
}

// Shape and placement checks; returns the shard's rows and row width.
absl::StatusOr<Geometry> ValidateSpec(const ShardSpec& spec) {
  if (spec.name().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("a shard spec has an empty name (variable '", spec.variable(), "')"));
  }
  const std::string what = Quoted(spec.name());
  const auto& shape = spec.shape().dim();
  const auto& full = spec.full_shape().dim();
  if (shape.size() != full.size()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": shape has rank ", shape.size(),
                                                   ", full_shape has rank ", full.size()));
  }
  for (int i = 0; i < shape.size(); ++i) {
    if (shape[i] <= 0 || full[i] <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": dim ", i, " is ", shape[i],
                                                     " (shape) / ", full[i],
                                                     " (full_shape); every dim must be > 0"));
    }
    if (i > 0 && shape[i] != full[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": shape dim ", i, " is ", shape[i], " but full_shape dim ", i,
                       " is ", full[i], "; shards split dim 0 only"));
    }
  }
  Geometry g{1, 1};
  int64_t full_rows = 1;
  if (!shape.empty()) {
    g.rows = shape[0];
    full_rows = full[0];
    for (int i = 1; i < shape.size(); ++i) {
      if (g.width > kMaxElements / shape[i]) {
        return absl::InvalidArgumentError(absl::StrCat(what, ": shape is too large"));
      }
      g.width *= shape[i];
    }
    if (full_rows > kMaxElements / g.width) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": full_shape is too large"));
    }
  }
  if (spec.row_offset() < 0 || spec.row_offset() > full_rows - g.rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": rows [", spec.row_offset(), ", ", spec.row_offset() + g.rows,
        ") do not fit in full_shape dim 0 of ", full_rows));
  }
  if (spec.num_parts() < 0 || (spec.num_parts() > 0 &&
                               (spec.part() < 0 || spec.part() >= spec.num_parts()))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": part ", spec.part(),
                                                   " is not in [0, num_parts ",
                                                   spec.num_parts(), ")"));
  }
  RETURN_IF_ERROR(Annotate(ValidateInitializer(spec.initializer()), what));
  RETURN_IF_ERROR(Annotate(Optimizer::Validate(spec.optimizer()), what));
  switch (spec.update().mode()) {
    case UpdateSpec::ASYNC:
      break;
    case UpdateSpec::SYNC:
      if (spec.update().num_replicas() < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": update.num_replicas must be >= 1 for SYNC, got ",
                         spec.update().num_replicas()));
      }
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": update.mode ", static_cast<int>(spec.update().mode()), " is unknown"));
  }
  return g;
}

// The first difference between two specs ("modified: optimizer.learning_rate: 0.1 -> 0.2"),
// or "" when they are equal.
std::string FirstDifference(const ShardSpec& a, const ShardSpec& b) {
  google::protobuf::util::MessageDifferencer differencer;
  std::string report;
  differencer.ReportDifferencesToString(&report);
  if (differencer.Compare(a, b)) return "";
  const size_t newline = report.find('\n');
  return newline == std::string::npos ? report : report.substr(0, newline);
}

absl::StatusOr<std::shared_ptr<Shard>> BuildShard(const ShardSpec& spec, Geometry geometry,
                                                  int64_t id_window) {
  const std::string what = Quoted(spec.name());
  ASSIGN_OR_RETURN(std::unique_ptr<Optimizer> optimizer, Optimizer::Create(spec.optimizer()));
  std::shared_ptr<Shard> shard;
  try {
    shard = std::make_shared<Shard>(spec, geometry, std::move(optimizer), id_window);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(
        what, ": cannot allocate ", geometry.rows * geometry.width, " floats and their slots"));
  }
  absl::MutexLock lock(&shard->mu);
  // Block by block (blocks hold whole rows); values are keyed by global element index, so
  // they do not depend on the blocks either.
  const int64_t width = shard->width;
  absl::Status status;
  shard->params.ForEachRun(0, shard->size, [&](int64_t first, float* p, int64_t n) {
    if (!status.ok()) return;
    status = InitializeRows(
        spec.initializer(), spec.variable().empty() ? spec.name() : spec.variable(),
        absl::MakeConstSpan(spec.full_shape().dim().data(),
                            static_cast<size_t>(spec.full_shape().dim_size())),
        spec.row_offset() + first / width, absl::MakeSpan(p, static_cast<size_t>(n)));
  });
  RETURN_IF_ERROR(Annotate(status, what));
  return shard;
}

class ShardStoreImpl final : public ShardStore {
 public:
  explicit ShardStoreImpl(const Options& options)
      : options_(options), start_(absl::Now()), timer_thread_([this] { TimerLoop(); }) {}

  ~ShardStoreImpl() override {
    Shutdown();
    {
      absl::MutexLock lock(&timer_mu_);
      timer_stop_ = true;
      timer_cv_.Signal();
    }
    timer_thread_.join();
  }

  absl::Status CreateShards(const CreateShardsRequest& request,
                            CreateShardsResponse* response) override {
    // 1. Validate every spec; a name twice in the request must carry the same spec.
    std::vector<Geometry> geometry(static_cast<size_t>(request.shards_size()));
    absl::flat_hash_map<std::string, int> first_index;
    std::vector<int> unique;
    for (int i = 0; i < request.shards_size(); ++i) {
      const ShardSpec& spec = request.shards(i);
      ASSIGN_OR_RETURN(geometry[i], ValidateSpec(spec));
      auto [it, inserted] = first_index.emplace(spec.name(), i);
      if (!inserted) {
        const std::string diff = FirstDifference(request.shards(it->second), spec);
        if (!diff.empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat(Quoted(spec.name()), " appears twice in the request with different ",
                           "specs (shards[", it->second, "] vs shards[", i, "]: ", diff, ")"));
        }
        continue;
      }
      unique.push_back(i);
    }
    // 2. Conflicts with existing shards fail early, before any allocation.
    std::vector<int> fresh;
    {
      absl::MutexLock lock(&map_mu_);
      for (int i : unique) {
        const ShardSpec& spec = request.shards(i);
        auto it = shards_.find(spec.name());
        if (it == shards_.end()) {
          fresh.push_back(i);
        } else {
          RETURN_IF_ERROR(CheckSameSpec(it->second->spec, spec));
        }
      }
    }
    // 3. Allocate and initialize outside the map lock (a large table takes a while).
    std::vector<std::shared_ptr<Shard>> built;
    for (int i : fresh) {
      ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard,
                       BuildShard(request.shards(i), geometry[i], options_.request_id_window));
      built.push_back(std::move(shard));
    }
    // 4. Insert all or nothing; a concurrent CreateShards may have inserted some meanwhile.
    absl::MutexLock lock(&map_mu_);
    for (const auto& shard : built) {
      auto it = shards_.find(shard->spec.name());
      if (it != shards_.end()) RETURN_IF_ERROR(CheckSameSpec(it->second->spec, shard->spec));
    }
    int created = 0;
    for (auto& shard : built) {
      const std::string name = shard->spec.name();
      const int64_t bytes = shard->bytes;
      if (shards_.emplace(name, std::move(shard)).second) {
        total_bytes_ += bytes;
        ++created;
      }
    }
    response->set_created(created);
    return absl::OkStatus();
  }

  absl::Status ListShards(const ListShardsRequest& request,
                          ListShardsResponse* response) override {
    response->set_task_index(options_.task_index);
    for (const std::shared_ptr<Shard>& shard : AllShards()) {
      const std::string& variable =
          shard->spec.variable().empty() ? shard->spec.name() : shard->spec.variable();
      if (!request.variable().empty() && request.variable() != variable) continue;
      ShardInfo* info = response->add_shards();
      *info->mutable_spec() = shard->spec;
      info->set_bytes(shard->bytes);
      absl::MutexLock lock(&shard->mu);
      info->set_version(shard->version);
    }
    return absl::OkStatus();
  }

  void Pull(const PullRequest& request, PullResponse* response, DoneCallback done) override {
    Pull(request, response, nullptr, std::move(done));
  }

  void Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
            DoneCallback done) override {
    const std::string what = absl::StrCat("pull from ", Quoted(request.shard()));
    absl::Status status = CheckTimeout(request.wait_timeout_ms(), what);
    std::shared_ptr<Shard> shard;
    RowRange range{0, 0};
    if (status.ok()) {
      absl::StatusOr<std::shared_ptr<Shard>> found = FindShard(request.shard(), what);
      status = found.status();
      if (status.ok()) shard = *std::move(found);
    }
    if (status.ok()) {
      absl::StatusOr<RowRange> resolved =
          ResolveRange(*shard, request.row_begin(), request.row_end(), what);
      status = resolved.status();
      if (status.ok()) range = *resolved;
    }
    if (!status.ok()) {
      done(status);
      return;
    }
    Shard* s = shard.get();
    if (in_place != nullptr) {
      auto share = [s, range, response, in_place]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        ShareRange(*s, range, in_place, response);
      };
      FillOrWait(
          std::move(shard), request.min_version(), request.wait_timeout_ms(), share,
          [share]() -> std::function<void()> { return share; }, std::move(done));
      return;
    }
    const size_t bytes = static_cast<size_t>(range.size() * s->width) * sizeof(float);
    std::string data = TakeBuffer(response->mutable_data(), bytes);
    FillOrWait(
        std::move(shard), request.min_version(), request.wait_timeout_ms(),
        [s, range, response, &data]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          CopyRange(*s, range, &data, response);
        },
        // A deferred fill takes the sized buffer along (only one of the two ever runs).
        [s, range, response, &data]() -> std::function<void()> {
          return [s, range, response, late = std::move(data)]() mutable
                 ABSL_NO_THREAD_SAFETY_ANALYSIS { CopyRange(*s, range, &late, response); };
        },
        std::move(done));
  }

  void PullRows(const PullRowsRequest& request, PullRowsResponse* response,
                DoneCallback done) override {
    const std::string what = absl::StrCat("pull rows from ", Quoted(request.shard()));
    absl::Status status = CheckTimeout(request.wait_timeout_ms(), what);
    std::shared_ptr<Shard> shard;
    if (status.ok()) {
      absl::StatusOr<std::shared_ptr<Shard>> found = FindShard(request.shard(), what);
      status = found.status();
      if (status.ok()) shard = *std::move(found);
    }
    const absl::Span<const int64_t> ids(request.ids().data(),
                                        static_cast<size_t>(request.ids_size()));
    if (status.ok()) status = CheckIds(*shard, ids, what);
    if (!status.ok()) {
      done(status);
      return;
    }
    Shard* s = shard.get();
    const size_t bytes = ids.size() * static_cast<size_t>(s->width) * sizeof(float);
    std::string data = TakeBuffer(response->mutable_data(), bytes);
    FillOrWait(
        std::move(shard), request.min_version(), request.wait_timeout_ms(),
        [s, ids, response, &data]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          CopyRows(*s, ids, &data, response);
        },
        // A deferred fill owns a copy of the ids (the request need not outlive this call)
        // and takes the sized buffer along.
        [s, ids, response, &data]() -> std::function<void()> {
          return [s, owned = std::vector<int64_t>(ids.begin(), ids.end()), response,
                  late = std::move(data)]() mutable ABSL_NO_THREAD_SAFETY_ANALYSIS {
            CopyRows(*s, owned, &late, response);
          };
        },
        std::move(done));
  }

  absl::Status Push(const PushRequest& request, PushResponse* response) override {
    return Push(request, request.data(), response);
  }

  absl::Status PushBatch(const PushBatchRequest& request,
                         PushBatchResponse* response) override {
    const absl::string_view data = request.data();
    return PushBatch(request, absl::MakeConstSpan(&data, 1), response);
  }

  absl::Status PushBatch(const PushBatchRequest& request,
                         absl::Span<const absl::string_view> pieces,
                         PushBatchResponse* response) override {
    const GradientBytes data(pieces);
    if (request.data_bytes_size() != request.pushes_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push batch: data_bytes has ", request.data_bytes_size(), " entries for ",
          request.pushes_size(), " pushes"));
    }
    int64_t total = 0;
    for (int i = 0; i < request.pushes_size(); ++i) {
      const int64_t bytes = request.data_bytes(i);
      if (bytes < 0 || bytes > data.size_bytes() - total) {
        return absl::InvalidArgumentError(absl::StrCat(
            "push batch: data_bytes[", i, "] = ", bytes, " overruns data (", data.size_bytes(),
            " bytes, ", total, " used by the items before)"));
      }
      if (!request.pushes(i).data().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "push batch: pushes[", i, "].data must be empty (the bytes go in data)"));
      }
      total += bytes;
    }
    if (total != data.size_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat("push batch: data_bytes sum to ", total,
                                                     ", data has ", data.size_bytes(),
                                                     " bytes"));
    }
    response->Clear();
    int64_t offset = 0;
    for (int i = 0; i < request.pushes_size(); ++i) {
      const int64_t bytes = request.data_bytes(i);
      RETURN_IF_ERROR(
          PushDense(request.pushes(i), data.Sub(offset, bytes), response->add_pushes()));
      offset += bytes;
    }
    return absl::OkStatus();
  }

  absl::Status Push(const PushRequest& request, absl::string_view data,
                    PushResponse* response) override {
    return PushDense(request, GradientBytes(data), response);
  }

  absl::Status PushRows(const PushRowsRequest& request, PushRowsResponse* response) override {
    const std::string what = absl::StrCat("push rows to ", Quoted(request.shard()));
    RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    const absl::Span<const int64_t> ids(request.ids().data(),
                                        static_cast<size_t>(request.ids_size()));
    RETURN_IF_ERROR(CheckIds(*shard, ids, what));
    std::vector<float> scratch;
    ASSIGN_OR_RETURN(const float* grad,
                     CheckedFloats(request.data(), static_cast<int64_t>(ids.size()) * shard->width,
                                   what, "data", &scratch));
    if (shard->sync) RETURN_IF_ERROR(CheckReplica(*shard, request.sync(), what));

    // Sum duplicate ids in order of appearance. Without duplicates (the usual case) an ASYNC
    // update reads the request's bytes in place.
    const int64_t width = shard->width;
    std::vector<int64_t> unique_ids;
    std::vector<float> summed;
    bool has_duplicates = false;
    {
      std::vector<uint32_t> slot;
      has_duplicates = UniqueIds(ids, shard->rows, &unique_ids, &slot);
      if (has_duplicates || shard->sync) {
        summed.resize(unique_ids.size() * static_cast<size_t>(width));
        std::vector<uint8_t> seen(unique_ids.size(), 0);
        for (size_t k = 0; k < ids.size(); ++k) {
          const int64_t p = slot[k];
          float* row = summed.data() + p * width;
          const float* g = grad + static_cast<int64_t>(k) * width;
          if (!seen[p]) {
            seen[p] = 1;
            std::memcpy(row, g, static_cast<size_t>(width) * sizeof(float));
          } else {
            FloatArray(row, width) += ConstFloatArray(g, width);
          }
        }
      }
    }

    std::vector<std::shared_ptr<Waiter>> ready;
    {
      absl::MutexLock lock(&shard->mu);
      if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
      SyncResult result;
      if (shard->sync) {
        RETURN_IF_ERROR(Annotate(shard->CheckStep(request.sync().step()), what));
        ASSIGN_OR_RETURN(result, shard->AddRows(request.sync().replica(), std::move(unique_ids),
                                                std::move(summed)));
      } else if (!ids.empty()) {
        if (has_duplicates) {
          shard->ApplyRows(unique_ids, summed.data(), &parallel_);
        } else {
          shard->ApplyRows(ids, grad, &parallel_);
        }
        result.applied = true;
      }
      RecordUpdate(*shard, request.request_id(), result, response, &ready);
    }
    CompleteReady(&ready);
    return absl::OkStatus();
  }

  absl::Status Assign(const AssignRequest& request, AssignResponse* response) override {
    const std::string what = absl::StrCat("assign to ", Quoted(request.shard()));
    RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    ASSIGN_OR_RETURN(RowRange range,
                     ResolveRange(*shard, request.row_begin(), request.row_end(), what));
    std::vector<float> scratch;
    ASSIGN_OR_RETURN(const float* values,
                     CheckedFloats(request.data(), range.size() * shard->width, what, "data",
                                   &scratch));
    absl::MutexLock lock(&shard->mu);
    if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
    const int64_t offset = range.begin * shard->width;
    const int64_t n = range.size() * shard->width;
    shard->params.Writable(range.begin, range.end);
    shard->params.ForEachRun(offset, offset + n, [&](int64_t first, float* p, int64_t m) {
      std::memcpy(p, values + (first - offset), static_cast<size_t>(m) * sizeof(float));
    });
    if (request.reset_slots()) {
      for (size_t s = 0; s < shard->slots.size(); ++s) {
        std::fill_n(shard->slots[s].data() + offset, n,
                    shard->optimizer->initial_slot_value(static_cast<int>(s)));
      }
    }
    shard->recent_ids.Insert(request.request_id());
    return absl::OkStatus();
  }

  void Health(HealthResponse* response) override {
    response->set_task_type("ps");
    response->set_task_index(options_.task_index);
    {
      absl::MutexLock lock(&map_mu_);
      response->set_num_shards(static_cast<int32_t>(shards_.size()));
      response->set_bytes(total_bytes_);
    }
    response->set_uptime_ms(absl::ToInt64Milliseconds(absl::Now() - start_));
    response->set_status(shutdown_.load(std::memory_order_acquire) ? "SHUTTING_DOWN"
                                                                   : "SERVING");
  }

  absl::Status SetGeneration(const SetGenerationRequest&, SetGenerationResponse*) override {
    return absl::UnimplementedError("SetGeneration is not implemented yet");
  }
  absl::Status DropShards(const DropShardsRequest&, DropShardsResponse*) override {
    return absl::UnimplementedError("DropShards is not implemented yet");
  }
  absl::Status Snapshot(const SnapshotRequest&, SnapshotResponse*) override {
    return absl::UnimplementedError("Snapshot is not implemented yet");
  }
  absl::Status SnapshotStatus(const SnapshotStatusRequest&, SnapshotStatusResponse*) override {
    return absl::UnimplementedError("SnapshotStatus is not implemented yet");
  }
  absl::Status Restore(const RestoreRequest&, RestoreResponse*) override {
    return absl::UnimplementedError("Restore is not implemented yet");
  }

  void Shutdown() override {
    // Set before visiting the shards: a pull that registers under a shard's lock after this
    // shard was visited sees the flag (the store's release/acquire through the lock).
    shutdown_.store(true, std::memory_order_release);
    for (const std::shared_ptr<Shard>& shard : AllShards()) {
      std::vector<std::shared_ptr<Waiter>> cancelled;
      {
        absl::MutexLock lock(&shard->mu);
        for (auto& entry : shard->waiters) {
          entry.second->in_shard = false;
          cancelled.push_back(std::move(entry.second));
        }
        shard->waiters.clear();
      }
      for (const std::shared_ptr<Waiter>& w : cancelled) {
        if (!w->Claim()) continue;
        RemoveTimer(*w);
        Finish(*w, absl::CancelledError(absl::StrCat("pull from ", Quoted(shard->spec.name()),
                                                     ": the ps is shutting down")));
      }
    }
  }

 private:
  // A dense push whose gradient is read where it lies (one buffer, or a batch's pieces).
  absl::Status PushDense(const PushRequest& request, const GradientBytes& grad,
                         PushResponse* response) {
    const std::string what = absl::StrCat("push to ", Quoted(request.shard()));
    RETURN_IF_ERROR(CheckRequestId(request.request_id(), what));
    ASSIGN_OR_RETURN(std::shared_ptr<Shard> shard, FindShard(request.shard(), what));
    ASSIGN_OR_RETURN(RowRange range,
                     ResolveRange(*shard, request.row_begin(), request.row_end(), what));
    RETURN_IF_ERROR(CheckGradient(grad, range.size() * shard->width, what, "data"));
    if (shard->sync) RETURN_IF_ERROR(CheckReplica(*shard, request.sync(), what));

    std::vector<std::shared_ptr<Waiter>> ready;
    {
      absl::MutexLock lock(&shard->mu);
      if (AnswerIfDuplicate(*shard, request.request_id(), response)) return absl::OkStatus();
      SyncResult result;
      if (shard->sync) {
        RETURN_IF_ERROR(Annotate(shard->CheckStep(request.sync().step()), what));
        result = shard->AddDense(request.sync().replica(), range, grad);
      } else {
        shard->ApplyDense(range, grad, &parallel_);
        result.applied = true;
      }
      RecordUpdate(*shard, request.request_id(), result, response, &ready);
    }
    CompleteReady(&ready);
    return absl::OkStatus();
  }

  absl::StatusOr<std::shared_ptr<Shard>> FindShard(const std::string& name,
                                                   absl::string_view what) const {
    absl::MutexLock lock(&map_mu_);
    auto it = shards_.find(name);
    if (it == shards_.end()) {
      return absl::NotFoundError(
          absl::StrCat(what, ": no such shard on ps task ", options_.task_index));
    }
    return it->second;
  }

  std::vector<std::shared_ptr<Shard>> AllShards() const {
    absl::MutexLock lock(&map_mu_);
    std::vector<std::shared_ptr<Shard>> all;
    all.reserve(shards_.size());
    for (const auto& entry : shards_) all.push_back(entry.second);
    return all;
  }

  static absl::Status CheckSameSpec(const ShardSpec& existing, const ShardSpec& wanted) {
    const std::string diff = FirstDifference(existing, wanted);
    if (diff.empty()) return absl::OkStatus();
    return absl::AlreadyExistsError(absl::StrCat(
        Quoted(wanted.name()), " already exists with a different spec (", diff, ")"));
  }

  // Fills the response now when the shard has reached min_version, else registers a waiter
  // completed later by an update, the timer or Shutdown. `done` runs with no store lock held.
  void FillOrWait(std::shared_ptr<Shard> shard, int64_t min_version, int64_t timeout_ms,
                  absl::FunctionRef<void()> fill_now,
                  absl::FunctionRef<std::function<void()>()> make_deferred_fill,
                  DoneCallback done) {
    absl::Status status;
    {
      absl::MutexLock lock(&shard->mu);
      if (shard->version >= min_version) {
        fill_now();
      } else if (shutdown_.load(std::memory_order_acquire)) {
        status = absl::CancelledError(absl::StrCat("pull from ", Quoted(shard->spec.name()),
                                                   ": the ps is shutting down"));
      } else {
        auto w = std::make_shared<Waiter>();
        w->shard = shard;
        w->min_version = min_version;
        w->timeout_ms = timeout_ms;
        w->fill = make_deferred_fill();
        w->done = std::move(done);
        w->shard_it = shard->waiters.emplace(min_version, w);
        w->in_shard = true;
        if (timeout_ms > 0) {
          // Lock order: shard->mu, then timer_mu_. The timer thread never holds timer_mu_
          // while it takes a shard's lock.
          absl::MutexLock timer_lock(&timer_mu_);
          const absl::Time deadline = absl::Now() + absl::Milliseconds(timeout_ms);
          w->timer_it = timers_.emplace(deadline, w);
          w->in_timer = true;
          if (w->timer_it == timers_.begin()) timer_cv_.Signal();
        }
        return;
      }
    }
    done(status);
  }

  void RemoveTimer(Waiter& w) {
    absl::MutexLock lock(&timer_mu_);
    if (w.in_timer) {
      timers_.erase(w.timer_it);
      w.in_timer = false;
    }
  }

  // Calls the waiter's `done` once; the caller has won Claim() and holds no store lock.
  static void Finish(Waiter& w, const absl::Status& status) {
    DoneCallback done = std::move(w.done);
    w.fill = nullptr;
    done(status);
  }

  void CompleteReady(std::vector<std::shared_ptr<Waiter>>* ready) {
    for (const std::shared_ptr<Waiter>& w : *ready) {
      RemoveTimer(*w);
      Finish(*w, absl::OkStatus());
    }
    ready->clear();
  }

  void Expire(Waiter& w) {
    if (!w.Claim()) return;
    int64_t version;
    {
      absl::MutexLock lock(&w.shard->mu);
      if (w.in_shard) {
        w.shard->waiters.erase(w.shard_it);
        w.in_shard = false;
      }
      version = w.shard->version;
    }
    Finish(w, absl::DeadlineExceededError(absl::StrCat(
                  "pull from ", Quoted(w.shard->spec.name()), ": version ", version,
                  " did not reach min_version ", w.min_version, " within ", w.timeout_ms,
                  " ms")));
  }

  // The one timer thread: sleeps until the earliest waiter deadline and expires waiters.
  void TimerLoop() {
    timer_mu_.Lock();
    while (!timer_stop_) {
      const absl::Time now = absl::Now();
      std::vector<std::shared_ptr<Waiter>> expired;
      while (!timers_.empty() && timers_.begin()->first <= now) {
        std::shared_ptr<Waiter> w = std::move(timers_.begin()->second);
        w->in_timer = false;
        timers_.erase(timers_.begin());
        expired.push_back(std::move(w));
      }
      if (!expired.empty()) {
        timer_mu_.Unlock();
        for (const std::shared_ptr<Waiter>& w : expired) Expire(*w);
        expired.clear();
        timer_mu_.Lock();
        continue;
      }
      if (timers_.empty()) {
        timer_cv_.Wait(&timer_mu_);
      } else {
        timer_cv_.WaitWithDeadline(&timer_mu_, timers_.begin()->first);
      }
    }
    timer_mu_.Unlock();
  }

  const Options options_;
  const absl::Time start_;
  std::atomic<bool> shutdown_{false};
  // Helpers for large updates: one per further core, so that an update finishes sooner when
  // cores are idle (the end of a push, when the client only waits).
  ParallelFor parallel_{std::min(7, UsableCores() - 1)};

  mutable absl::Mutex map_mu_;
  std::map<std::string, std::shared_ptr<Shard>> shards_ ABSL_GUARDED_BY(map_mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(map_mu_) = 0;

  absl::Mutex timer_mu_;
  absl::CondVar timer_cv_;
  TimerList timers_ ABSL_GUARDED_BY(timer_mu_);
  bool timer_stop_ ABSL_GUARDED_BY(timer_mu_) = false;
  // Last: started once every other member is initialized, joined by the destructor.
  std::thread timer_thread_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<ShardStore>> ShardStore::Create(const Options& options) {
  if (options.request_id_window < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ShardStore options: request_id_window must be >= 0, got ", options.request_id_window));
  }
  return std::unique_ptr<ShardStore>(new ShardStoreImpl(options));
}

}  // namespace shardps
