// SignalWatcher: takes SIGINT and SIGTERM for a daemon on a thread that it owns and joins.
// The signals must be blocked in every thread of the process (BlockTerminationSignals, first
// thing in main(), before any thread starts), so that they stay pending until the watcher
// reads them instead of ending the process.
//
// Thread-safety: Start and the destructor from one thread; `on_signal` runs on the watcher's
// thread, once for each signal taken, and never after the destructor returned.
#ifndef SHARDPS_RPC_SIGNAL_WATCHER_H_
#define SHARDPS_RPC_SIGNAL_WATCHER_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"

namespace shardps {

class SignalWatcher {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread (and so in every thread it starts after)
  // and ignores SIGPIPE.
  static void BlockTerminationSignals();

  // Starts watching. INTERNAL when the kernel refuses a descriptor.
  static absl::StatusOr<std::unique_ptr<SignalWatcher>> Start(std::function<void(int)> on_signal);

  SignalWatcher(const SignalWatcher&) = delete;
  SignalWatcher& operator=(const SignalWatcher&) = delete;
  // Wakes the thread and joins it; signals that arrive later stay pending.
  ~SignalWatcher();

 private:
  SignalWatcher(int signal_fd, int wake_fd, std::function<void(int)> on_signal);
  void Loop();

  const int signal_fd_;  // signalfd of SIGINT and SIGTERM
  const int wake_fd_;    // eventfd the destructor writes to end Loop
  const std::function<void(int)> on_signal_;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace shardps

#endif  // SHARDPS_RPC_SIGNAL_WATCHER_H_
