#include "coordinator/scheduler.h"

#include "absl/strings/str_cat.h"

namespace shardps {

absl::StatusOr<Scheduler> Scheduler::Create(const Plan& plan) {
  if (plan.steps_per_epoch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("steps_per_epoch must be >= 1, got ", plan.steps_per_epoch));
  }
  if (plan.total_steps < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("total steps must be >= 0, got ", plan.total_steps));
  }
  if (plan.mode == Mode::kSync && plan.num_replicas < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_replicas must be >= 1 in sync mode, got ", plan.num_replicas));
  }
  if (plan.mode == Mode::kSync &&
      (plan.replicas_to_aggregate < 0 || plan.replicas_to_aggregate > plan.num_replicas)) {
    return absl::InvalidArgumentError(
        absl::StrCat("replicas_to_aggregate must be 0..num_replicas (", plan.num_replicas,
                     ") in sync mode, got ", plan.replicas_to_aggregate));
  }
  if (plan.mode == Mode::kStale && plan.staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("staleness must be >= 0, got ", plan.staleness));
  }
  return Scheduler(plan);
}

Scheduler::Scheduler(const Plan& plan) : plan_(plan) {
  total_steps_ = RoundUp(plan.total_steps);
}

int64_t Scheduler::RoundUp(int64_t steps) const {
  if (plan_.mode != Mode::kSync) return steps;
  int64_t r = plan_.num_replicas;
  return (steps + r - 1) / r * r;
}

StepTask Scheduler::MakeTask(int64_t step_id) const {
  StepTask task;
  task.step_id = step_id;
  task.epoch = static_cast<int32_t>(step_id / plan_.steps_per_epoch);
  task.batch_index = step_id % plan_.steps_per_epoch;
  switch (plan_.mode) {
    case Mode::kAsync:
      break;
    case Mode::kSync:
      task.sync = true;
      task.sync_step = step_id / plan_.num_replicas;
      task.replica = static_cast<int32_t>(step_id % plan_.num_replicas);
      task.min_version = task.sync_step;
      break;
    case Mode::kStale:
      task.min_version = std::max<int64_t>(0, step_id - plan_.staleness);
      break;
  }
  return task;
}

int64_t Scheduler::KnownVersion() const {
  if (plan_.mode == Mode::kSync) return done_prefix_ / plan_.num_replicas;
  return done_prefix_;
}

std::optional<StepTask> Scheduler::Lease(int worker, absl::Time deadline) {
  if (cancelled_) return std::nullopt;
  // Steps restored as done (a resumed journal) are never leased again.
  while (next_new_ < total_steps_ && IsDone(next_new_)) ++next_new_;
  int64_t step_id = -1;
  if (!requeued_steps_.empty()) {
    step_id = *requeued_steps_.begin();
  } else if (next_new_ < total_steps_) {
    step_id = next_new_;
  } else {
    return std::nullopt;
  }
  if (barrier_ >= 0 && step_id >= barrier_) return std::nullopt;
  StepTask task = MakeTask(step_id);
  if (plan_.mode != Mode::kAsync && task.min_version > KnownVersion()) return std::nullopt;
  if (step_id == next_new_) {
    ++next_new_;
  } else {
    requeued_steps_.erase(step_id);
  }
  leases_[step_id] = LeaseInfo{worker, deadline};
  return task;
}

bool Scheduler::Complete(int64_t step_id, int worker, std::vector<int64_t>* superseded) {
  auto it = leases_.find(step_id);
  if (IsDone(step_id)) {
    if (it != leases_.end() && it->second.worker == worker) leases_.erase(it);
    return false;
  }
  // A completion from a worker whose lease expired still counts if nobody else finished the
  // step: the work was done.
  if (it != leases_.end()) leases_.erase(it);
  requeued_steps_.erase(step_id);
  if (step_id < 0 || step_id >= total_steps_) return false;
  MarkDone(step_id);
  SupersedeIfAggregated(step_id, superseded);
  return true;
}

void Scheduler::MarkDone(int64_t step_id) {
  done_.insert(step_id);
  while (!done_.empty() && *done_.begin() == done_prefix_) {
    done_.erase(done_.begin());
    ++done_prefix_;
  }
}

void Scheduler::SupersedeIfAggregated(int64_t step_id, std::vector<int64_t>* superseded) {
  if (!has_backups()) return;
  const int64_t r = plan_.num_replicas;
  const int64_t first = step_id / r * r;
  int done = 0;
  for (int64_t s = first; s < first + r; ++s) done += IsDone(s) ? 1 : 0;
  if (done < plan_.replicas_to_aggregate || done == r) return;
  // Every ps has applied the sync step: each of the k completions means the replica's pushes
  // were taken or dropped on every shard, and a shard drops only after applying the step, so
  // a shard that has not applied it holds k complete replicas, and applies it then.
  for (int64_t s = first; s < first + r; ++s) {
    if (IsDone(s)) continue;
    requeued_steps_.erase(s);  // a lease, if any, stays: its call is still out
    MarkDone(s);
    ++superseded_;
    if (superseded != nullptr) superseded->push_back(s);
  }
}

void Scheduler::Requeue(int64_t step_id, int worker) {
  auto it = leases_.find(step_id);
  if (it == leases_.end() || it->second.worker != worker) return;
  leases_.erase(it);
  if (IsDone(step_id) || cancelled_) return;
  requeued_steps_.insert(step_id);
  ++requeued_;
}

std::vector<int64_t> Scheduler::RequeueWorker(int worker) {
  std::vector<int64_t> steps;
  for (const auto& [step, lease] : leases_) {
    if (lease.worker == worker) steps.push_back(step);
  }
  for (int64_t step : steps) Requeue(step, worker);
  return steps;
}

int64_t Scheduler::LeasedTo(int worker) const {
  int64_t n = 0;
  for (const auto& [step, lease] : leases_) n += lease.worker == worker ? 1 : 0;
  return n;
}

std::vector<std::pair<int64_t, int>> Scheduler::ExpireLeases(absl::Time now) {
  std::vector<std::pair<int64_t, int>> expired;
  for (const auto& [step, lease] : leases_) {
    if (lease.deadline < now) expired.emplace_back(step, lease.worker);
  }
  for (const auto& [step, worker] : expired) Requeue(step, worker);
  return expired;
}

absl::Time Scheduler::NextLeaseDeadline() const {
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [step, lease] : leases_) next = std::min(next, lease.deadline);
  return next;
}

int64_t Scheduler::AddSteps(int64_t steps) {
  if (steps > 0 && !cancelled_) total_steps_ = RoundUp(total_steps_ + steps);
  return total_steps_;
}

absl::Status Scheduler::Restore(int64_t done_prefix, const std::vector<int64_t>& also_done,
                                int64_t total_steps) {
  const int64_t total = RoundUp(total_steps);
  if (done_prefix < 0 || done_prefix > total) {
    return absl::InvalidArgumentError(absl::StrCat("restore: ", done_prefix,
                                                   " steps done is not in [0, ", total, "]"));
  }
  for (int64_t id : also_done) {
    if (id < 0 || id >= total) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: done step ", id, " is not in [0, ", total, ")"));
    }
  }
  total_steps_ = total;
  done_prefix_ = done_prefix;
  done_.clear();
  for (int64_t id : also_done) {
    if (id >= done_prefix_) done_.insert(id);
  }
  while (!done_.empty() && *done_.begin() == done_prefix_) {
    done_.erase(done_.begin());
    ++done_prefix_;
  }
  // A journal records the steps that completed, not those their sync step superseded.
  for (int64_t id : also_done) SupersedeIfAggregated(id, nullptr);
  next_new_ = done_prefix_;
  requeued_steps_.clear();
  leases_.clear();
  barrier_ = -1;
  cancelled_ = false;
  return absl::OkStatus();
}

void Scheduler::Cancel() {
  cancelled_ = true;
  requeued_steps_.clear();
}

}  // namespace shardps
