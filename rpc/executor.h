// Executor: a fixed pool of threads that gRPC reactions hand work to, so that a reaction
// never blocks one of gRPC's own threads on a lock wait, a large copy or an optimizer update
// (gRFC L67; grpc/grpc#36609).
//
// Thread-safety: Schedule may be called from any thread. The destructor runs the closures
// already scheduled, then joins the threads.
#ifndef SHARDPS_RPC_EXECUTOR_H_
#define SHARDPS_RPC_EXECUTOR_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

class Executor {
 public:
  explicit Executor(int num_threads);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  void Schedule(std::function<void()> fn);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace shardps

#endif  // SHARDPS_RPC_EXECUTOR_H_
