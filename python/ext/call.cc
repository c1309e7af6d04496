#include "python/ext/call.h"

#include <Python.h>

#include <algorithm>

#include "absl/time/clock.h"

namespace shardps {
namespace python {

namespace py = pybind11;

Parking::~Parking() { parked_.clear(); }

void Parking::Park(std::shared_ptr<Call> call, std::vector<py::object> keep) {
  parked_.push_back(Parked{std::move(call), std::move(keep)});
}

void Parking::Sweep() {
  parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                               [](const Parked& p) { return p.call->done.HasBeenNotified(); }),
                parked_.end());
}

bool Parking::Drain(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    Sweep();
    if (parked_.empty()) return true;
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return false;
    std::shared_ptr<Call> first = parked_.front().call;
    WithoutGil([&] { return first->done.WaitForNotificationWithTimeout(std::min(left, kSignalPoll)); });
  }
}

Waiter::~Waiter() {
  if (started_ && !call_->done.HasBeenNotified()) parking_.Park(call_, std::move(keep_));
}

std::function<void(const absl::Status&)> Waiter::Callback() {
  started_ = true;
  return [call = call_](const absl::Status& s) { call->Finish(s); };
}

absl::Status Waiter::Wait() {
  while (!WithoutGil([&] { return call_->done.WaitForNotificationWithTimeout(kSignalPoll); })) {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
  }
  return call_->status;
}

}  // namespace python
}  // namespace shardps
