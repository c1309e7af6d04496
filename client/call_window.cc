#include "client/call_window.h"

#include <algorithm>
#include <utility>

namespace shardps {

void CallWindow::Add(int ps, Call call) {
  absl::MutexLock lock(&mu_);
  queues_[static_cast<size_t>(ps)].push_back(std::move(call));
}

void CallWindow::Start() {
  std::vector<size_t> first;  // how many calls each ps starts with
  {
    absl::MutexLock lock(&mu_);
    for (size_t ps = 0; ps < queues_.size(); ++ps) {
      first.push_back(window_ <= 0 ? queues_[ps].size()
                                   : std::min(queues_[ps].size(), static_cast<size_t>(window_)));
    }
  }
  for (size_t ps = 0; ps < first.size(); ++ps) {
    for (size_t i = 0; i < first[ps]; ++i) StartNext(ps);
  }
}

void CallWindow::StartNext(size_t ps) {
  Call call;
  {
    absl::MutexLock lock(&mu_);
    if (queues_[ps].empty()) return;
    call = std::move(queues_[ps].front());
    queues_[ps].pop_front();
  }
  call([self = shared_from_this(), ps] { self->StartNext(ps); });
}

}  // namespace shardps
