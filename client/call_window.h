// CallWindow: starts calls to each ps with at most `window` of them in flight per ps (0: no
// limit); each finished call starts the next one queued for its ps, in the order they were
// added. A window serves one Pull or Push only, so calls of different operations never wait
// on each other (a pull waiting for a version could otherwise hold back the push that
// produces it).
//
// Thread-safety: thread-safe. Owned by shared_ptr: each started call holds the window until
// it runs `next`.
#ifndef SHARDPS_CLIENT_CALL_WINDOW_H_
#define SHARDPS_CLIENT_CALL_WINDOW_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

class CallWindow : public std::enable_shared_from_this<CallWindow> {
 public:
  // Runs a call; it must run `next` once, when the call has finished.
  using Call = std::function<void(std::function<void()> next)>;

  CallWindow(int num_ps, int window) : queues_(static_cast<size_t>(num_ps)), window_(window) {}

  // Queues `call` for ps `ps`. REQUIRES: Start not called yet.
  void Add(int ps, Call call);

  // Starts the first calls of every ps. Call once, after every Add.
  void Start();

 private:
  void StartNext(size_t ps);

  absl::Mutex mu_;
  std::vector<std::deque<Call>> queues_ ABSL_GUARDED_BY(mu_);
  const int window_;
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_CALL_WINDOW_H_
