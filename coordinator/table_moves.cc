#include "coordinator/table_moves.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/bucket_mover.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace shardps {

absl::Status DrainToStepBoundaryLocked(ChiefState* s, Recovery* recovery) {
  recovery->mu().AssertHeld();
  Scheduler& scheduler = *s->scheduler;
  const int64_t barrier = std::min(scheduler.total_steps(), scheduler.RoundUp(scheduler.NextNew()));
  scheduler.SetBarrier(barrier);
  auto drained = [s, recovery, barrier]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s->mu) {
    recovery->mu().AssertHeld();
    return s->scheduler->DonePrefix() >= barrier || s->stopping ||
           s->status.state() != JobStatus::RUNNING || recovery->pending();
  };
  while (!drained()) s->mu.AwaitWithTimeout(absl::Condition(&drained), absl::Milliseconds(50));
  if (s->scheduler->DonePrefix() >= barrier) return absl::OkStatus();
  scheduler.ClearBarrier();
  return absl::AbortedError(absl::StrCat("the job stopped or needs a recovery (",
                                         recovery->cause(), ") while draining to step ",
                                         barrier));
}

void EndStepDrainLocked(ChiefState* s) {
  s->scheduler->ClearBarrier();
  s->WakeDispatcherLocked();
}

void SwitchAtStepBoundaries(ChiefState* s, Recovery* recovery, BucketMoveOptions* options) {
  if (s->job.mode() != JobSpec::SYNC) return;
  options->before_switch = [s, recovery] {
    absl::MutexLock lock(&s->mu);
    return DrainToStepBoundaryLocked(s, recovery);
  };
  options->after_switch = [s] {
    absl::MutexLock lock(&s->mu);
    EndStepDrainLocked(s);
  };
}

TableMoves::TableMoves(ChiefState* state, PsClient* ps, Recovery* recovery)
    : s_(state), ps_(ps), recovery_(recovery) {}

absl::Status TableMoves::RequestLocked(const MoveTableBucketsRequest& request, Done done) {
  RecoveryLockHeld();
  RETURN_IF_ERROR(s_->CheckJobLocked(request.job_id()));
  const std::string& id = s_->status.job_id();
  if (s_->status.state() != JobStatus::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("job \"", id, "\" is not running"));
  }
  if (request.variable().empty()) {
    return absl::InvalidArgumentError("move-buckets: no variable named");
  }
  if (request.balance()) {
    if (request.count() != 0 || request.from_shard() != 0 || request.to_shard() != 0) {
      return absl::InvalidArgumentError(
          "move-buckets: balance plans its own moves; count, from_shard and to_shard must be 0");
    }
    if (!(request.tolerance() >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("move-buckets: tolerance must be >= 0, got ", request.tolerance()));
    }
  } else if (request.count() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("move-buckets: count must be >= 1, got ", request.count()));
  }
  if (request.per_switch() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("move-buckets: per_switch must be >= 0, got ", request.per_switch()));
  }
  if (request.pause_ms() < 0 || request.pause_ms() > 60000) {
    return absl::InvalidArgumentError(
        absl::StrCat("move-buckets: pause_ms must be in [0, 60000], got ", request.pause_ms()));
  }
  if (request.freeze_ms() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("move-buckets: freeze_ms must be >= 0, got ", request.freeze_ms()));
  }
  if (s_->scheduler->Finished() || s_->phase.final_checkpoint_done()) {
    return absl::FailedPreconditionError(
        absl::StrCat("move-buckets: job \"", id, "\" has done its training"));
  }
  if (queued_.has_value() || running_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "move-buckets: job \"", id, "\" is moving buckets already; wait for that move to end"));
  }
  // A checkpoint under way only delays the move (the control thread runs one at a time).
  const JobPhase::Kind kind = s_->phase.kind();
  if (recovery_->pending() ||
      (kind != JobPhase::Kind::kTraining && kind != JobPhase::Kind::kCheckpointCut)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "move-buckets: job \"", id, "\" is not training now (", s_->phase.Text(),
        recovery_->pending() ? recovery_->cause() : std::string(), "); move once it is"));
  }
  queued_ = Queued{request, std::move(done)};
  s_->WakeControlLocked();
  return absl::OkStatus();
}

void TableMoves::FailRequestsLocked() {
  if (!queued_.has_value()) return;
  Done done = std::move(queued_->done);
  queued_.reset();
  Answer(std::move(done), absl::FailedPreconditionError(absl::StrCat(
                              "job \"", s_->status.job_id(), "\" is not running")));
}

void TableMoves::Answer(Done done, absl::StatusOr<MoveTableBucketsResponse> outcome) {
  s_->mu.Unlock();
  done(std::move(outcome));
  s_->mu.Lock();
}

void TableMoves::RunLocked() {
  if (!queued_.has_value()) return;
  Queued q = std::move(*queued_);
  queued_.reset();
  running_ = true;
  const MoveTableBucketsRequest& r = q.request;
  const absl::Time start = absl::Now();
  MoveTableBucketsResponse response;
  response.set_variable(r.variable());
  response.set_from_shard(r.from_shard());
  response.set_to_shard(r.to_shard());
  response.set_steps_before(s_->scheduler->done_steps());
  BucketMoveOptions options;
  if (r.freeze_ms() > 0) options.freeze = absl::Milliseconds(r.freeze_ms());
  if (r.per_switch() > 0) options.buckets_per_switch = r.per_switch();
  options.pause = absl::Milliseconds(r.pause_ms());
  options.generation = s_->generation;
  SwitchAtStepBoundaries(s_, recovery_, &options);
  absl::StatusOr<BucketMoveStats> moved;
  if (r.balance()) {
    LogInfo() << "balancing the buckets of \"" << r.variable() << "\"";
    s_->mu.Unlock();
    absl::StatusOr<BalanceStats> balanced = BalanceTableBuckets(
        ps_, r.variable(), r.tolerance() > 0 ? r.tolerance() : 0.1, options);
    s_->mu.Lock();
    response.set_from_shard(-1);
    response.set_to_shard(-1);
    if (balanced.ok()) {
      for (const PlannedMove& m : balanced->moves) {
        response.add_moves(absl::StrCat(m.count, " buckets from shard ", m.from_shard,
                                        " to shard ", m.to_shard));
      }
      response.set_imbalance_before(balanced->imbalance_before);
      response.set_imbalance_after(balanced->imbalance_after);
      moved = balanced->moved;
      moved->from_ps = moved->to_ps = -1;
    } else {
      moved = balanced.status();
    }
  } else {
    LogInfo() << "moving " << r.count() << " buckets of \"" << r.variable()
              << "\" from shard " << r.from_shard() << " to shard " << r.to_shard();
    s_->mu.Unlock();
    moved = MoveTableBuckets(ps_, r.variable(), r.from_shard(), r.to_shard(), r.count(), options);
    s_->mu.Lock();
  }
  running_ = false;
  response.set_steps_after(s_->scheduler->done_steps());
  response.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  response.set_unix_time(absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch()));
  absl::StatusOr<MoveTableBucketsResponse> outcome = response;
  if (moved.ok()) {
    response.set_from_ps(moved->from_ps);
    response.set_to_ps(moved->to_ps);
    response.set_buckets(moved->buckets);
    response.set_rows(moved->rows);
    response.set_bytes(moved->bytes);
    response.set_frozen_s(absl::ToDoubleSeconds(moved->frozen));
    response.set_routing_version(moved->routing_version);
    ++moves_;
    buckets_ += moved->buckets;
    outcome = response;
    LogInfo() << "moved " << moved->buckets << " buckets of \"" << r.variable() << "\" ("
              << (r.balance() ? absl::StrCat("balance: ", absl::StrJoin(response.moves(), "; "),
                                             "; rows max/mean x", response.imbalance_before(),
                                             " -> x", response.imbalance_after())
                              : absl::StrCat("ps ", moved->from_ps, " -> ps ", moved->to_ps))
              << ", " << moved->rows
              << " rows, " << moved->bytes << " bytes in " << response.seconds()
              << " s; longest freeze " << response.frozen_s() << " s)";
  } else {
    ++failed_;
    response.set_error(moved.status().ToString());
    // What the caller asked for wrong keeps its code (an unknown variable is a bad argument);
    // a refusal of the job's state too; anything else failed on a ps and was undone.
    const absl::StatusCode code = moved.status().code();
    if (code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound) {
      outcome = absl::InvalidArgumentError(moved.status().message());
    } else if (code == absl::StatusCode::kFailedPrecondition) {
      outcome = moved.status();
    } else {
      outcome = absl::AbortedError(
          absl::StrCat("move-buckets failed and was undone: ", moved.status().message()));
    }
    LogWarning() << "moving buckets of \"" << r.variable() << "\" failed: " << moved.status();
  }
  last_ = response;
  Answer(std::move(q.done), std::move(outcome));
}

void TableMoves::AddToStatusLocked(JobStatus* status) const {
  status->set_bucket_moves(moves_);
  status->set_bucket_moves_failed(failed_);
  status->set_buckets_moved(buckets_);
  if (last_.has_value()) *status->mutable_last_bucket_move() = *last_;
}

}  // namespace shardps
