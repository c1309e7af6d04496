#include "bench/background_runner.h"

#include <utility>

namespace shardps {
namespace bench {

BackgroundRunner::BackgroundRunner() : thread_([this] { Loop(); }) {}

BackgroundRunner::~BackgroundRunner() {
  Wait();
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

bool BackgroundRunner::busy() const {
  absl::MutexLock lock(&mu_);
  return work_ != nullptr || running_;
}

bool BackgroundRunner::TryStart(std::function<void()> work) {
  absl::MutexLock lock(&mu_);
  if (work_ != nullptr || running_) return false;
  work_ = std::move(work);
  return true;
}

void BackgroundRunner::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](BackgroundRunner* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
        return r->work_ == nullptr && !r->running_;
      },
      this));
}

void BackgroundRunner::Loop() {
  while (true) {
    std::function<void()> work;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](BackgroundRunner* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu_) {
            return r->work_ != nullptr || r->stop_;
          },
          this));
      if (work_ == nullptr) return;  // stop_, and nothing in hand
      work = std::move(work_);
      work_ = nullptr;
      running_ = true;
    }
    work();
    absl::MutexLock lock(&mu_);
    running_ = false;
  }
}

}  // namespace bench
}  // namespace shardps
