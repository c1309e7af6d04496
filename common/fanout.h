// Fanout: joins many asynchronous sub-calls into one completion. `done` runs once, after the
// last sub-call has finished, with the first error seen or OK; with no sub-calls it runs at
// once, in Make.
//
// Thread-safety: Finish may be called from any thread.
#ifndef SHARDPS_COMMON_FANOUT_H_
#define SHARDPS_COMMON_FANOUT_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

class Fanout {
 public:
  using Done = std::function<void(const absl::Status&)>;

  Fanout(size_t count, Done done) : remaining_(count), done_(std::move(done)) {}

  static std::shared_ptr<Fanout> Make(size_t count, Done done) {
    auto f = std::make_shared<Fanout>(count, std::move(done));
    if (count == 0) f->done_(absl::OkStatus());
    return f;
  }

  // One sub-call finished with `status`.
  void Finish(const absl::Status& status) {
    if (!status.ok()) {
      absl::MutexLock lock(&mu_);
      if (first_error_.ok()) first_error_ = status;
    }
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      absl::Status result;
      {
        absl::MutexLock lock(&mu_);
        result = first_error_;
      }
      done_(result);
    }
  }

 private:
  std::atomic<size_t> remaining_;
  Done done_;
  absl::Mutex mu_;
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardps

#endif  // SHARDPS_COMMON_FANOUT_H_
