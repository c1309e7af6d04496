#include "compute/parallel_for.h"

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

void ParallelFor::Job::Work() {
  for (int64_t i = next.fetch_add(1); i < pieces; i = next.fetch_add(1)) piece(i);
}

void ParallelFor::Run(int64_t n, int64_t grain, int64_t align,
                      absl::FunctionRef<void(int64_t, int64_t)> fn) {
  const int64_t pieces = std::min<int64_t>(static_cast<int64_t>(threads_.size()) + 1,
                                           n / std::max<int64_t>(grain, 1));
  if (pieces <= 1) {
    fn(0, n);
    return;
  }
  align = std::max<int64_t>(align, 1);
  auto boundary = [n, pieces, align](int64_t i) {
    return i == pieces ? n : n * i / pieces / align * align;
  };
  RunPieces(pieces, [&](int64_t i) { fn(boundary(i), boundary(i + 1)); });
}

void ParallelFor::ForEach(int64_t count, absl::FunctionRef<void(int64_t)> fn) {
  if (count <= 0) return;
  if (count == 1) {
    fn(0);
    return;
  }
  RunPieces(count, fn);
}

void ParallelFor::RunPieces(int64_t pieces, absl::FunctionRef<void(int64_t)> piece) {
  Job job(piece, pieces);
  {
    absl::MutexLock lock(&mu_);
    const int64_t asks = std::min<int64_t>(pieces - 1, static_cast<int64_t>(threads_.size()));
    try {
      for (int64_t i = 0; i < asks; ++i) queue_.push_back(&job);
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
