#include "ps_server/push_hold.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace shardps {

PushHold::PushHold(int task_index) : task_index_(task_index), thread_([this] { Loop(); }) {}

PushHold::~PushHold() {
  {
    absl::MutexLock lock(&mu_);
    ReleaseLocked("the ps is stopping");
    stopping_ = true;
  }
  thread_.join();
}

absl::Status PushHold::Hold(int64_t from_step, absl::Time deadline) {
  if (from_step < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("hold pushes: from_step ", from_step, " is negative"));
  }
  absl::MutexLock lock(&mu_);
  if (from_ >= 0 && from_ != from_step) {
    return absl::FailedPreconditionError(
        absl::StrCat("hold pushes from step ", from_step, ": ps task ", task_index_,
                     " already holds the pushes from step ", from_, " for another cut"));
  }
  if (snapshotting_) {
    return absl::FailedPreconditionError(
        absl::StrCat("hold pushes from step ", from_step, ": ps task ", task_index_,
                     " is taking the snapshot of the cut at step ", from_));
  }
  from_ = from_step;
  deadline_ = deadline;
  ++deadline_changes_;
  ended_from_ = -1;
  return absl::OkStatus();
}

int64_t PushHold::Release() {
  absl::MutexLock lock(&mu_);
  const int64_t n = static_cast<int64_t>(held_.size());
  ReleaseLocked("it was released");
  return n;
}

void PushHold::ReleaseLocked(const char* why) {
  if (from_ < 0) return;
  if (!snapshotting_) {
    ended_from_ = from_;
    ended_why_ = why;
  }
  from_ = -1;
  snapshotting_ = false;
  deadline_ = absl::InfiniteFuture();
  for (std::function<void()>& apply : held_) to_run_.push_back(std::move(apply));
  held_.clear();
}

void PushHold::Admit(std::optional<int64_t> step, std::function<void()> apply) {
  {
    absl::MutexLock lock(&mu_);
    if (from_ >= 0 && step.has_value() && *step >= from_) {
      held_.push_back(std::move(apply));
      return;
    }
  }
  apply();
}

absl::Status PushHold::BeginSnapshot(int64_t from_step) {
  absl::MutexLock lock(&mu_);
  if (from_ == from_step && !snapshotting_) {
    snapshotting_ = true;
    return absl::OkStatus();
  }
  if (from_ == from_step) {
    return absl::FailedPreconditionError(absl::StrCat(
        "snapshot under the hold from step ", from_step, ": ps task ", task_index_,
        " is already taking it"));
  }
  if (ended_from_ == from_step) {
    return absl::AbortedError(absl::StrCat(
        "snapshot under the hold from step ", from_step, ": ps task ", task_index_,
        "'s hold ended before it (", ended_why_,
        "), so pushes of later steps may be applied; cut again"));
  }
  return absl::AbortedError(absl::StrCat("snapshot under the hold from step ", from_step,
                                         ": ps task ", task_index_, " holds no pushes from it",
                                         from_ >= 0 ? absl::StrCat(" (it holds from step ",
                                                                   from_, ")")
                                                    : std::string(" (no hold is in place)")));
}

void PushHold::EndSnapshot() {
  absl::MutexLock lock(&mu_);
  if (!snapshotting_) return;
  ReleaseLocked("its snapshot was taken");
}

int64_t PushHold::held() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(held_.size());
}

void PushHold::Loop() {
  absl::MutexLock lock(&mu_);
  while (true) {
    // A new deadline wakes the wait, which then waits again until that one.
    const int64_t changes = deadline_changes_;
    auto ready = [this, changes]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !to_run_.empty() || deadline_changes_ != changes ||
             (from_ >= 0 && !snapshotting_ && absl::Now() >= deadline_);
    };
    mu_.AwaitWithDeadline(absl::Condition(&ready), from_ >= 0 ? deadline_ : absl::InfiniteFuture());
    if (from_ >= 0 && !snapshotting_ && absl::Now() >= deadline_) {
      LogWarning() << "ps task " << task_index_ << ": the hold of pushes from step " << from_
                   << " expired before its snapshot (the chief gave the cut up or died); "
                   << held_.size() << " held pushes applied now";
      ReleaseLocked("its deadline passed");
    }
    while (!to_run_.empty()) {
      std::function<void()> apply = std::move(to_run_.front());
      to_run_.pop_front();
      mu_.Unlock();
      apply();
      mu_.Lock();
    }
    if (stopping_) return;
  }
}

}  // namespace shardps
