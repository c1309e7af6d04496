#include "coordinator/recovery.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/log.h"

namespace shardps {

using Kind = JobPhase::Kind;

namespace {
double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }
}  // namespace

Recovery::Recovery(ChiefState* state, PsMonitor* monitor, PsClient* ps)
    : s_(state), monitor_(monitor), ps_(ps) {}

std::string Recovery::PsName(size_t k) const {
  if (k >= s_->ps_addresses.size()) return absl::StrCat("ps ", k);
  return absl::StrCat("ps ", k, " (", s_->ps_addresses[k], ")");
}

void Recovery::StartJobLocked(std::vector<uint64_t> incarnations) {
  expected_incarnation_ = std::move(incarnations);
  incarnations_checked_at_ = absl::InfinitePast();
  cause_.clear();
}

void Recovery::PsAddedLocked(std::vector<uint64_t> incarnations) {
  // The whole set, as HealthEach answered it: the ps the job ran on keep theirs.
  for (size_t k = expected_incarnation_.size(); k < incarnations.size(); ++k) {
    expected_incarnation_.push_back(incarnations[k]);
  }
}

bool Recovery::RestartedLocked(size_t k, const PsMonitor::PsView& v) const {
  return k < expected_incarnation_.size() && v.incarnation != expected_incarnation_[k] &&
         v.last_up_sent >= incarnations_checked_at_;
}

void Recovery::PsStateLostLocked(int ps_task, absl::string_view why) {
  RollBackDueLocked(absl::StrCat(
      ps_task >= 0 ? absl::StrCat("ps ", ps_task) : std::string("a ps"),
      " lost the job's shards (", why, ")"));
}

void Recovery::RollBackDueLocked(std::string cause) {
  if (cause_.empty()) {
    cause_ = std::move(cause);
    LogWarning() << cause_;
  }
  s_->WakeControlLocked();
  monitor_->ProbeNow();
}

void Recovery::UpdatePsPhaseLocked() {
  const std::vector<PsMonitor::PsView> views = monitor_->Views();
  std::string unreachable;
  for (size_t k = 0; k < views.size(); ++k) {
    const PsMonitor::PsView& v = views[k];
    // A ps the monitor has never seen up may just not have been probed yet, unless the
    // job reached it at its start (its incarnation is known): then it went down since,
    // and the job pauses for it as for any other (a ps killed before the monitor's first
    // answer left the job requeueing its steps with no reason given).
    const bool job_reached_it =
        k < expected_incarnation_.size() && expected_incarnation_[k] != 0;
    if (!v.probed && !job_reached_it) continue;
    if (!v.up) {
      if (unreachable.empty()) {
        const double down_s = v.failing_since == absl::InfiniteFuture()
                                  ? 0
                                  : absl::ToDoubleSeconds(absl::Now() - v.failing_since);
        unreachable = absl::StrCat(PsName(k), " unreachable for ",
                                   static_cast<int64_t>(down_s), " s: ", v.error);
      }
      continue;
    }
    if (RestartedLocked(k, v) && cause_.empty()) {
      cause_ = absl::StrCat(PsName(k), " restarted (incarnation ",
                            absl::Hex(v.incarnation), ") and lost its shards");
      LogWarning() << cause_;
    }
  }
  if (!unreachable.empty()) {
    s_->SetPhaseLocked(Kind::kPsUnreachable, unreachable);
  } else if (s_->phase.kind() == Kind::kPsUnreachable && cause_.empty()) {
    // (With a rollback due, the job stays held until the rollback begins.)
    s_->ReleasePhaseLocked(Kind::kPsUnreachable);
    LogInfo() << "every ps is reachable again; resuming";
  }
}

bool Recovery::WaitForEveryPsLocked(const std::string& cause,
                                    std::vector<PsMonitor::PsView>* views) {
  while (true) {
    if (s_->stopping || s_->status.state() != JobStatus::RUNNING ||
        s_->phase.kind() == Kind::kInterrupted) {
      return false;
    }
    *views = monitor_->Views();
    int down = -1;
    for (size_t k = 0; k < views->size(); ++k) {
      if (!(*views)[k].up) {
        down = static_cast<int>(k);
        break;
      }
    }
    if (down < 0) return true;
    s_->SetPhaseLocked(Kind::kRecovering,
                       absl::StrCat(cause, "; waiting for ", PsName(down), ": ",
                                    (*views)[down].error));
    monitor_->ProbeNow();
    s_->control_wake = false;
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
      return s_->control_wake || s_->stopping;
    };
    s_->mu.AwaitWithTimeout(absl::Condition(&woken), absl::Milliseconds(500));
  }
}

Recovery::Result Recovery::RecoverLocked() {
  const absl::Time t0 = absl::Now();
  const std::string cause = cause_;
  s_->SetPhaseLocked(Kind::kRecovering, cause);
  s_->WakeDispatcherLocked();
  // Every ps must answer first.
  std::vector<PsMonitor::PsView> views;
  if (!WaitForEveryPsLocked(cause, &views)) return Result::kStopped;
  int64_t generation = s_->generation;
  for (const PsMonitor::PsView& v : views) generation = std::max(generation, v.generation);
  ++generation;
  if (s_->store != nullptr) {
    s_->store_state.generation = generation;  // before the ps move (see PrepareJob)
    s_->WriteStateLocked();
  }
  const int64_t done_before = s_->scheduler->done_steps();
  Rolled rolled;
  if (!RollBackLocked(cause, generation, &rolled)) return Result::kRetryLater;
  return ApplyLocked(cause, t0, generation, done_before, rolled);
}

bool Recovery::RollBackLocked(const std::string& cause, int64_t generation, Rolled* rolled) {
  const JobSpec job = s_->job;
  const std::vector<VariableDef> defs = s_->defs;
  const JobStore* store = s_->store.get();
  const int dense_ps = s_->dense_ps;
  s_->SetPhaseLocked(Kind::kRecovering,
                     absl::StrCat(cause, "; restoring generation ", generation));
  s_->mu.Unlock();
  absl::StatusOr<RollbackOutcome> outcome =
      RollBack(*ps_, job, defs, store, generation, dense_ps);
  std::vector<absl::Status> statuses;
  std::vector<HealthResponse> health;
  rolled->health_sent = absl::Now();
  if (outcome.ok()) {
    ps_->HealthEach(/*from_chief=*/true, absl::Seconds(5), &statuses, &health);
  }
  s_->mu.Lock();
  if (!outcome.ok()) {
    const std::string detail = absl::StrCat(cause, "; restore failed, retrying: ",
                                            outcome.status().message());
    s_->SetPhaseLocked(Kind::kRecovering, detail);
    LogWarning() << "recovering: " << detail;
    return false;
  }
  for (size_t k = 0; k < health.size(); ++k) {
    if (!statuses[k].ok()) {
      s_->SetPhaseLocked(Kind::kRecovering,
                         absl::StrCat(cause, "; ps ", k, " failed after the restore: ",
                                      statuses[k].message()));
      return false;
    }
    rolled->incarnations.push_back(health[k].incarnation());
  }
  rolled->outcome = *std::move(outcome);
  return true;
}

Recovery::Result Recovery::ApplyLocked(const std::string& cause, absl::Time t0,
                                       int64_t generation, int64_t done_before,
                                       const Rolled& rolled) {
  const RollbackOutcome& out = rolled.outcome;
  s_->generation = generation;
  expected_incarnation_ = rolled.incarnations;
  incarnations_checked_at_ = rolled.health_sent;
  absl::Status restored =
      s_->scheduler->Restore(out.steps_done, {}, s_->scheduler->total_steps());
  if (!restored.ok()) {
    s_->EndJobLocked(JobStatus::FAILED, absl::StrCat("recovery: ", restored.message()));
    return Result::kStopped;
  }
  if (s_->store != nullptr) {
    s_->store_state.generation_start_steps = out.steps_done;
    s_->WriteStateLocked();
    absl::Status journal = s_->store->StartJournal(generation);
    if (!journal.ok()) LogWarning() << "step journal: " << journal;
  }
  const int64_t lost = std::max<int64_t>(0, done_before - out.steps_done);
  RecoveryInfo* r = s_->status.add_recoveries();
  r->set_unix_time(UnixSeconds(absl::Now()));
  r->set_cause(cause);
  r->set_action(out.checkpoint_id > 0
                    ? absl::StrCat("rolled back to checkpoint ", out.checkpoint_id, " (step ",
                                   out.steps_done, ")")
                    : std::string("re-initialized (no usable checkpoint)"));
  if (!out.skipped.empty()) {
    r->set_action(absl::StrCat(r->action(), "; skipped ", absl::StrJoin(out.skipped, "; ")));
  }
  r->set_steps_lost(lost);
  r->set_seconds(absl::ToDoubleSeconds(absl::Now() - t0));
  s_->status.set_steps_lost(s_->status.steps_lost() + lost);
  if (s_->store != nullptr) {
    // In the job's journal, so that a restarted chief reports them too.
    JobStore::State::Recovery kept{r->unix_time(), r->cause(), r->action(), r->steps_lost(),
                                   r->seconds()};
    std::vector<JobStore::State::Recovery>& recoveries = s_->store_state.recoveries;
    recoveries.push_back(std::move(kept));
    if (recoveries.size() > static_cast<size_t>(JobStore::kMaxRecoveries)) {
      recoveries.erase(recoveries.begin(),
                       recoveries.end() - JobStore::kMaxRecoveries);
    }
    s_->store_state.steps_lost = s_->status.steps_lost();
    s_->WriteStateLocked();
  }
  LogInfo() << "recovered from " << cause << ": " << r->action() << ", " << lost
            << " steps lost, " << r->seconds() << " s; generation " << generation;
  cause_.clear();
  s_->SetPhaseLocked(Kind::kTraining);
  s_->WakeDispatcherLocked();
  return Result::kRecovered;
}

void Recovery::AddPsToStatusLocked(const std::vector<PsMonitor::PsView>& views,
                                   JobStatus* status) const {
  const absl::Time now = absl::Now();
  for (size_t k = 0; k < views.size(); ++k) {
    const PsMonitor::PsView& v = views[k];
    PsInfo* p = status->add_ps();
    p->set_index(static_cast<int>(k));
    p->set_address(k < s_->ps_addresses.size() ? s_->ps_addresses[k] : "");
    p->set_incarnation(v.incarnation);
    p->set_generation(v.generation);
    p->set_bytes(v.bytes);
    if (!v.up) {
      p->set_state("unreachable");
      p->set_error(v.error);
      if (v.last_up != absl::InfinitePast()) {
        p->set_down_s(absl::ToDoubleSeconds(now - v.last_up));
      }
    } else if (RestartedLocked(k, v) && expected_incarnation_[k] != 0) {
      p->set_state(s_->phase.kind() == Kind::kRecovering ? "restoring" : "restarted");
    } else {
      p->set_state("up");
    }
  }
}

}  // namespace shardps
