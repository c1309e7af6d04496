// Calls from Python that wait on the network. A Call is what one PsClient call completes; a
// Waiter waits for it with the GIL released, taking the GIL back every kSignalPoll to run
// Python's signal handlers, so that Ctrl-C (a KeyboardInterrupt) ends the wait within about
// that long. An interrupted call still runs to its end in C++: the Waiter then parks it, with
// the Python objects whose memory it reads or writes, in its client's Parking, which lets
// them go once the call has completed.
//
// Thread-safety: Call::Finish from any thread; everything else with the GIL held.
#ifndef SHARDPS_PYTHON_EXT_CALL_H_
#define SHARDPS_PYTHON_EXT_CALL_H_

#include <pybind11/pybind11.h>

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/ps_client_types.h"

namespace shardps {
namespace python {

inline constexpr absl::Duration kSignalPoll = absl::Milliseconds(100);

// One call in flight, shared by its callback and its Waiter. It holds no Python object, so
// the callback's thread (which holds no GIL) may be the one that destroys it.
struct Call {
  absl::Notification done;
  absl::Status status;      // written before `done` is notified
  PullVersions versions;    // a pull's versions
  std::vector<float> out;   // a pull's values when the extension owns the result

  void Finish(const absl::Status& s) {
    status = s;
    done.Notify();
  }
};

// Interrupted calls, each with the Python objects it uses, until it completes.
class Parking {
 public:
  Parking() = default;
  Parking(const Parking&) = delete;
  Parking& operator=(const Parking&) = delete;
  ~Parking();  // REQUIRES: the GIL; drops whatever is parked (call Drain first)

  void Park(std::shared_ptr<Call> call, std::vector<pybind11::object> keep);
  // Lets go of the calls that have completed, with their objects.
  void Sweep();
  // Waits for every parked call to complete (the GIL released meanwhile), at most `timeout`.
  // Returns whether none is left.
  bool Drain(absl::Duration timeout);

 private:
  struct Parked {
    std::shared_ptr<Call> call;
    std::vector<pybind11::object> keep;
  };
  std::vector<Parked> parked_;
};

// Waits for one call. Start the call with callback() as its `done`; keep() every Python
// object whose memory it reads or writes.
class Waiter {
 public:
  explicit Waiter(Parking* parking) : parking_(*parking), call_(std::make_shared<Call>()) {}
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  // A call started and not completed (an exception is leaving the wait) is parked.
  ~Waiter();

  Call& call() { return *call_; }
  void Keep(pybind11::object object) { keep_.push_back(std::move(object)); }
  // The call's `done`. Marks the call started.
  std::function<void(const absl::Status&)> Callback();

  // The call's status once it completed. Throws pybind11::error_already_set when a signal
  // handler raised meanwhile (KeyboardInterrupt).
  absl::Status Wait();

 private:
  Parking& parking_;
  const std::shared_ptr<Call> call_;
  std::vector<pybind11::object> keep_;
  bool started_ = false;
};

// Runs `fn` with the GIL released.
template <typename Fn>
auto WithoutGil(Fn&& fn) {
  pybind11::gil_scoped_release release;
  return fn();
}

// The next item of a queue Python waits on (a worker's steps, an evaluator's evaluations):
// calls `next(slice)` with the GIL released in slices of at most kSignalPoll, running Python's
// signal handlers between them (Ctrl-C raises pybind11::error_already_set); nullptr once
// `stopped()` or after `timeout_s` (< 0: no limit).
template <typename NextFn, typename StoppedFn>
auto NextOrNull(double timeout_s, NextFn next, StoppedFn stopped) {
  const absl::Time deadline =
      timeout_s < 0 ? absl::InfiniteFuture() : absl::Now() + absl::Seconds(timeout_s);
  while (true) {
    const absl::Duration slice = std::max(
        std::min(kSignalPoll, deadline - absl::Now()), absl::ZeroDuration());
    auto item = WithoutGil([&] { return next(slice); });
    if (item != nullptr || stopped() || absl::Now() >= deadline) return item;
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
  }
}

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_CALL_H_
