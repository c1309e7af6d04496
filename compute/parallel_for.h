// ParallelFor: runs one call's work on the calling thread and a few helper threads, split
// exactly as the caller says, so that a result never depends on which thread ran a piece.
//
//   Run(n, grain, align, fn)  splits [0, n) into consecutive pieces by a fixed rule (below):
//                             for elementwise and row-wise updates (the ps' optimizers).
//   ForEach(count, fn)        calls fn(0), ..., fn(count - 1): for a caller that splits its
//                             work into `count` tasks itself (a batch into slices, say).
//
// Every piece or task is claimed by one thread and runs start to end there; pieces write
// disjoint outputs, so a split run is bit-identical to the same pieces run one after another.
// The caller claims pieces too, so it never waits behind another caller's work: at worst it
// computes every piece itself.
//
// Thread-safety: Run and ForEach may be called from any number of threads at once. The
// destructor REQUIRES that no call is in progress.
#ifndef SHARDPS_COMPUTE_PARALLEL_FOR_H_
#define SHARDPS_COMPUTE_PARALLEL_FOR_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

class ParallelFor {
 public:
  // Starts `helpers` threads (0: every call computes on its caller's thread alone).
  explicit ParallelFor(int helpers);
  ~ParallelFor();

  ParallelFor(const ParallelFor&) = delete;
  ParallelFor& operator=(const ParallelFor&) = delete;

  int helpers() const { return static_cast<int>(threads_.size()); }

  // Calls fn(begin, end) for consecutive pieces covering [0, n); returns when all have run.
  // The split: p = min(helpers() + 1, n / max(grain, 1)) pieces; p <= 1 is one call fn(0, n)
  // on this thread; otherwise piece i is [B(i), B(i + 1)) with B(i) = n * i / p / align * align
  // (integer division, align <= 1 taken as 1) and B(p) = n. Inner boundaries are multiples of
  // `align` (pieces that write floats then do not share cache lines).
  void Run(int64_t n, int64_t grain, int64_t align,
           absl::FunctionRef<void(int64_t, int64_t)> fn);

  // Calls fn(i) once for every i in [0, count), on this thread and the helpers (count == 1:
  // on this thread); returns when all have run. count may exceed helpers() + 1.
  void ForEach(int64_t count, absl::FunctionRef<void(int64_t)> fn);

 private:
  // One call's pieces, on the caller's stack until every helper that took it has let go.
  struct Job {
    Job(absl::FunctionRef<void(int64_t)> f, int64_t count) : piece(f), pieces(count) {}
    void Work();

    const absl::FunctionRef<void(int64_t)> piece;
    const int64_t pieces;
    std::atomic<int64_t> next{0};
    int users = 0;  // helpers inside Work(); guarded by ParallelFor::mu_
  };

  // Runs piece(0), ..., piece(pieces - 1) on this thread and the helpers. REQUIRES: pieces > 1.
  void RunPieces(int64_t pieces, absl::FunctionRef<void(int64_t)> piece);
  void Loop();

  absl::Mutex mu_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);  // one entry per helper a job asks for
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// CPUs this process may run on (what an affinity mask leaves of the machine), at least 1.
int UsableCores();

}  // namespace shardps

#endif  // SHARDPS_COMPUTE_PARALLEL_FOR_H_
