// ParallelFor: runs a large optimizer update on several threads. An update is elementwise
// (dense) or row-wise over unique rows (sparse), and every piece is computed by the same
// correctly rounded loop with the same per-update coefficients, so a split update is
// bit-identical to an unsplit one. The caller claims pieces too, so it never waits behind
// another caller's work: at worst it computes every piece itself.
//
// Thread-safety: Run may be called from any number of threads at once. The destructor
// REQUIRES that no Run is in progress.
#ifndef SHARDPS_PS_SERVER_PARALLEL_FOR_H_
#define SHARDPS_PS_SERVER_PARALLEL_FOR_H_

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
  // Starts `helpers` threads (0: every Run computes on its caller's thread alone).
  explicit ParallelFor(int helpers);
  ~ParallelFor();

  ParallelFor(const ParallelFor&) = delete;
  ParallelFor& operator=(const ParallelFor&) = delete;

  int helpers() const { return static_cast<int>(threads_.size()); }

  // Calls fn(begin, end) for consecutive pieces covering [0, n), each at least `grain` long
  // (one piece, on this thread, when n < 2 * grain); returns when all have run. Inner
  // boundaries are multiples of `align` (pieces that write floats then do not share cache
  // lines). At most helpers() + 1 pieces.
  void Run(int64_t n, int64_t grain, int64_t align,
           absl::FunctionRef<void(int64_t, int64_t)> fn);

 private:
  // One Run's pieces, on the caller's stack until every helper that took it has let go.
  struct Job {
    Job(absl::FunctionRef<void(int64_t, int64_t)> f, int64_t size, int64_t count, int64_t a);
    int64_t Boundary(int64_t i) const;
    void Work();

    const absl::FunctionRef<void(int64_t, int64_t)> fn;
    const int64_t n;
    const int64_t pieces;
    const int64_t align;
    std::atomic<int64_t> next{0};
    int users = 0;  // helpers inside Work(); guarded by ParallelFor::mu_
  };

  void Loop();

  absl::Mutex mu_;
  std::deque<Job*> queue_ ABSL_GUARDED_BY(mu_);  // one entry per helper a job asks for
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

// CPUs this process may run on (what an affinity mask leaves of the machine), at least 1.
int UsableCores();

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PARALLEL_FOR_H_
