// FakeWorker: a WorkerInterface for the chief's tests whose StartJob succeeds at once (or
// answers the error a test sets), whose Status succeeds at once, and whose RunStep calls
// stay pending until the test finishes them (with any status) or CancelAll answers them
// CANCELLED (unless the test turned that off).
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_COORDINATOR_FAKE_WORKER_H_
#define SHARDPS_COORDINATOR_FAKE_WORKER_H_

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coordinator/worker_interface.h"

namespace shardps {

constexpr absl::Duration kFakeWorkerWait = absl::Seconds(20);

// A worker whose StartJob succeeds at once (answered from a thread of its own, never from the
// chief's call) and whose RunStep calls stay pending until the test finishes them.
class FakeWorker : public WorkerInterface {
 public:
  struct Call {
    StepRequest request;
    StepResponse* response;
    StatusCallback done;
  };

  explicit FakeWorker(std::string address) : address_(std::move(address)) {}
  ~FakeWorker() override {
    for (std::thread& t : threads_) t.join();
  }

  const std::string& address() const override { return address_; }

  void StartJobAsync(const StartJobRequest* request, StartJobResponse* response, absl::Time,
                     StatusCallback done) override {
    absl::MutexLock lock(&mu_);
    if (start_error_.ok()) response->set_backend("fake");
    ++starts_;
    last_start_ps_.assign(request->ps_addresses().begin(), request->ps_addresses().end());
    threads_.emplace_back([done = std::move(done), s = start_error_] { done(s); });
  }

  // Every StartJob from now on answers `s` (OK: accepts the job).
  void set_start_error(absl::Status s) {
    absl::MutexLock lock(&mu_);
    start_error_ = std::move(s);
  }

  void RunStepAsync(const StepRequest* request, StepResponse* response, absl::Time,
                    StatusCallback done) override {
    absl::MutexLock lock(&mu_);
    pending_.push_back(Call{*request, response, std::move(done)});
    ++steps_received_;
    max_pending_ = std::max<int>(max_pending_, static_cast<int>(pending_.size()));
  }

  // Answered from a thread of its own: the chief calls it holding its lock, which the
  // callback takes.
  void StatusAsync(const WorkerStatusRequest*, WorkerStatusResponse*, absl::Time,
                   StatusCallback done) override {
    absl::MutexLock lock(&mu_);
    threads_.emplace_back([done = std::move(done)] { done(absl::OkStatus()); });
  }
  // OK, or UNAVAILABLE for the first set_lost_shutdowns(n) calls (a Shutdown lost on the way).
  void ShutdownAsync(const WorkerShutdownRequest*, WorkerShutdownResponse*, absl::Time,
                     StatusCallback done) override {
    absl::Status s;
    {
      absl::MutexLock lock(&mu_);
      ++shutdowns_;
      if (lost_shutdowns_ > 0) {
        --lost_shutdowns_;
        s = absl::UnavailableError("connection reset (a fake)");
      }
    }
    done(s);
  }
  void set_lost_shutdowns(int n) {
    absl::MutexLock lock(&mu_);
    lost_shutdowns_ = n;
  }
  int shutdowns() {
    absl::MutexLock lock(&mu_);
    return shutdowns_;
  }

  // Counts the request and, unless set_answer_cancel(false), finishes every pending call
  // with CANCELLED, on the calling thread.
  void CancelAll() override {
    std::vector<Call> cancelled;
    {
      absl::MutexLock lock(&mu_);
      ++cancels_;
      if (!answer_cancel_) return;
      cancelled = std::move(pending_);
      pending_.clear();
    }
    for (Call& call : cancelled) call.done(absl::CancelledError("cancelled by the chief"));
  }

  // Whether CancelAll answers the pending calls (true at first). With false they stay
  // pending after a CancelAll, as calls whose answer is already on its way would.
  void set_answer_cancel(bool answer) {
    absl::MutexLock lock(&mu_);
    answer_cancel_ = answer;
  }

  // Waits until `n` steps are pending; returns false after kFakeWorkerWait.
  bool WaitForPending(int n) {
    absl::MutexLock lock(&mu_);
    auto ready = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return static_cast<int>(pending_.size()) >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&ready), kFakeWorkerWait);
  }

  // Step ids pending, oldest first.
  std::vector<int64_t> Pending() {
    absl::MutexLock lock(&mu_);
    std::vector<int64_t> ids;
    for (const Call& c : pending_) ids.push_back(c.request.step_id());
    return ids;
  }

  // Finishes the pending call of step `step_id` (the oldest pending one when -1) with `s`.
  // Returns its step id, or -1 when none is pending.
  int64_t Finish(absl::Status s = absl::OkStatus(), int64_t step_id = -1) {
    Call call;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.begin();
      if (step_id >= 0) {
        it = std::find_if(pending_.begin(), pending_.end(),
                          [step_id](const Call& c) { return c.request.step_id() == step_id; });
      }
      if (it == pending_.end()) return -1;
      call = std::move(*it);
      pending_.erase(it);
    }
    if (s.ok()) {
      call.response->set_examples(64);
      call.response->set_loss(1.0);
    }
    call.done(s);  // on the test's thread: the chief's lock is not held here
    return call.request.step_id();
  }

  int steps_received() {
    absl::MutexLock lock(&mu_);
    return steps_received_;
  }
  int max_pending() {
    absl::MutexLock lock(&mu_);
    return max_pending_;
  }
  // The ps addresses of the last StartJob.
  std::vector<std::string> last_start_ps() {
    absl::MutexLock lock(&mu_);
    return last_start_ps_;
  }
  int starts() {
    absl::MutexLock lock(&mu_);
    return starts_;
  }
  int cancels() {
    absl::MutexLock lock(&mu_);
    return cancels_;
  }

 private:
  const std::string address_;
  absl::Mutex mu_;
  int shutdowns_ ABSL_GUARDED_BY(mu_) = 0;
  int lost_shutdowns_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Call> pending_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  int steps_received_ ABSL_GUARDED_BY(mu_) = 0;
  int max_pending_ ABSL_GUARDED_BY(mu_) = 0;
  int starts_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> last_start_ps_ ABSL_GUARDED_BY(mu_);
  int cancels_ ABSL_GUARDED_BY(mu_) = 0;
  bool answer_cancel_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status start_error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_FAKE_WORKER_H_
