// BackgroundRunner: one piece of work at a time on a thread of its own, beside a loop that
// must not wait for it. The one-process trainers of the benchmarks evaluate through it, as a
// cluster's evaluator evaluates beside its workers: offered an evaluation while the last is
// still running, it declines, as the evaluator daemon skips the versions it had no time for.
//
// Thread-safety: TryStart, busy and Wait are called from one thread (the loop's); the work
// runs on the runner's thread.
#ifndef SHARDPS_BENCH_BACKGROUND_RUNNER_H_
#define SHARDPS_BENCH_BACKGROUND_RUNNER_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardps {
namespace bench {

class BackgroundRunner {
 public:
  BackgroundRunner();
  // Waits for the work in hand, then ends the thread.
  ~BackgroundRunner();
  BackgroundRunner(const BackgroundRunner&) = delete;
  BackgroundRunner& operator=(const BackgroundRunner&) = delete;

  // Whether work is in hand.
  bool busy() const;
  // Starts `work` on the runner's thread and returns true when it is idle; returns false,
  // dropping `work`, when it is busy.
  bool TryStart(std::function<void()> work);
  // Returns once no work is in hand.
  void Wait();

 private:
  void Loop();

  mutable absl::Mutex mu_;
  std::function<void()> work_ ABSL_GUARDED_BY(mu_);  // empty: idle
  bool running_ ABSL_GUARDED_BY(mu_) = false;        // work_ taken and under way
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_BACKGROUND_RUNNER_H_
