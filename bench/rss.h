// Resident memory of processes, from /proc, for benchmarks that measure what a daemon's
// memory does while something runs (a checkpoint snapshot while updates copy blocks):
// VmRSS (resident now) and VmHWM (the peak since the process started, or since the peak was
// last reset by writing 5 to /proc/PID/clear_refs, Linux >= 4.0), and a sampler that keeps
// the highest VmRSS seen in a window.
//
// Thread-safety: the functions are thread-safe; an RssSampler is used from one thread.
#ifndef SHARDPS_BENCH_RSS_H_
#define SHARDPS_BENCH_RSS_H_

#include <sys/types.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace shardps {
namespace bench {

struct ProcessRss {
  int64_t rss_bytes = 0;   // VmRSS
  int64_t peak_bytes = 0;  // VmHWM
};

// VmRSS and VmHWM of `pid` (NOT_FOUND when the process is gone, INTERNAL when the fields
// are missing).
absl::StatusOr<ProcessRss> ReadRss(pid_t pid);

// Resets `pid`'s VmHWM to its VmRSS now (PERMISSION_DENIED for another user's process
// without the right, UNIMPLEMENTED where the kernel does not support it).
absl::Status ResetPeakRss(pid_t pid);

// Samples the VmRSS of each process every `interval` on a thread of its own, keeping the
// highest seen, until Stop (or destruction). A process that has gone keeps what was seen.
class RssSampler {
 public:
  RssSampler(std::vector<pid_t> pids, absl::Duration interval);
  ~RssSampler();
  RssSampler(const RssSampler&) = delete;
  RssSampler& operator=(const RssSampler&) = delete;

  // Stops sampling (after one last sample) and returns the highest VmRSS of each process,
  // in the order given (0 for a process never read). Idempotent.
  std::vector<int64_t> Stop();

 private:
  void Loop();
  void Sample();

  const std::vector<pid_t> pids_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<int64_t> max_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;  // last: started once the rest is initialized
};

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_RSS_H_
