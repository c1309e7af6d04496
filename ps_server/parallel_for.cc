#include "ps_server/parallel_for.h"

#include <sched.h>

#include <algorithm>
#include <new>

namespace shardps {

ParallelFor::ParallelFor(int helpers) {
  for (int i = 0; i < helpers; ++i) threads_.emplace_back([this] { Loop(); });
}

ParallelFor::~ParallelFor() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

ParallelFor::Job::Job(absl::FunctionRef<void(int64_t, int64_t)> f, int64_t size,
                      int64_t count, int64_t a)
    : fn(f), n(size), pieces(count), align(std::max<int64_t>(a, 1)) {}

int64_t ParallelFor::Job::Boundary(int64_t i) const {
  return i == pieces ? n : n * i / pieces / align * align;
}

void ParallelFor::Job::Work() {
  for (int64_t i = next.fetch_add(1); i < pieces; i = next.fetch_add(1)) {
    fn(Boundary(i), Boundary(i + 1));
  }
}

void ParallelFor::Run(int64_t n, int64_t grain, int64_t align,
                      absl::FunctionRef<void(int64_t, int64_t)> fn) {
  const int64_t pieces = std::min<int64_t>(static_cast<int64_t>(threads_.size()) + 1,
                                           n / std::max<int64_t>(grain, 1));
  if (pieces <= 1) {
    fn(0, n);
    return;
  }
  Job job(fn, n, pieces, align);
  {
    absl::MutexLock lock(&mu_);
    try {
      for (int64_t i = 1; i < pieces; ++i) queue_.push_back(&job);
    } catch (const std::bad_alloc&) {
      // Fewer helpers asked for: this thread claims whatever pieces they do not.
    }
  }
  job.Work();
  absl::MutexLock lock(&mu_);
  // Every piece is claimed; helpers that have not picked the job up never will.
  queue_.erase(std::remove(queue_.begin(), queue_.end(), &job), queue_.end());
  auto idle = [&job]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return job.users == 0; };
  mu_.Await(absl::Condition(&idle));
}

void ParallelFor::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || !queue_.empty();
    };
    mu_.Await(absl::Condition(&ready));
    if (stop_) return;
    Job* job = queue_.front();
    queue_.pop_front();
    ++job->users;
    mu_.Unlock();
    job->Work();
    mu_.Lock();
    --job->users;
  }
}

int UsableCores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) {
    return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  }
  return std::max(1, CPU_COUNT(&set));
}

}  // namespace shardps
