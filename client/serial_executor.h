// SerialExecutor: runs closures one at a time, in the order they were scheduled, on one
// thread of its own, started by the first Schedule (an executor never used costs no thread).
// The destructor runs the closures already scheduled, then joins the thread; destroyed by
// one of its own closures (a thread cannot join itself), it lets the thread finish the queue
// and exit on its own instead.
//
// Thread-safety: Schedule may be called from any thread; while the destructor runs, only
// from the executor's own closures.
#ifndef SHARDPS_CLIENT_SERIAL_EXECUTOR_H_
#define SHARDPS_CLIENT_SERIAL_EXECUTOR_H_

#include <deque>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

class SerialExecutor {
 public:
  SerialExecutor() = default;
  ~SerialExecutor();
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // Runs `fn` on the executor's thread after the closures scheduled before it. Throws
  // std::system_error when the thread cannot be started.
  void Schedule(std::function<void()> fn);

 private:
  // What the thread uses, shared with it: it outlives the executor when the thread is left to
  // finish on its own.
  struct State {
    absl::Mutex mu;
    std::deque<std::function<void()>> queue ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
  };
  static void Loop(const std::shared_ptr<State>& state);

  const std::shared_ptr<State> state_ = std::make_shared<State>();
  absl::Mutex thread_mu_;
  bool started_ ABSL_GUARDED_BY(thread_mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(thread_mu_);
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_SERIAL_EXECUTOR_H_
