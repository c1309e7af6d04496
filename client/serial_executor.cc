#include "client/serial_executor.h"

#include <utility>

namespace shardps {

SerialExecutor::~SerialExecutor() {
  {
    absl::MutexLock lock(&state_->mu);
    state_->stop = true;
  }
  std::thread thread;
  {
    absl::MutexLock lock(&thread_mu_);
    thread = std::move(thread_);  // started_ stays: a closure's Schedule only queues now
  }
  if (!thread.joinable()) return;
  if (thread.get_id() == std::this_thread::get_id()) {
    thread.detach();  // a closure destroyed its owner; the thread holds `state_` itself
  } else {
    thread.join();
  }
}

void SerialExecutor::Schedule(std::function<void()> fn) {
  {
    absl::MutexLock lock(&thread_mu_);
    if (!started_) {
      thread_ = std::thread([state = state_] { Loop(state); });
      started_ = true;
    }
  }
  absl::MutexLock lock(&state_->mu);
  state_->queue.push_back(std::move(fn));
}

void SerialExecutor::Loop(const std::shared_ptr<State>& state) {
  while (true) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&state->mu);
      auto ready = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
        return state->stop || !state->queue.empty();
      };
      state->mu.Await(absl::Condition(&ready));
      if (state->queue.empty()) return;  // stopped and drained
      fn = std::move(state->queue.front());
      state->queue.pop_front();
    }
    fn();
  }
}

}  // namespace shardps
