#include "coordinator/ps_scaling.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/bucket_mover.h"
#include "client/variable_layout.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/job_preparation.h"
#include "coordinator/rollback.h"
#include "coordinator/table_moves.h"

namespace shardps {
namespace {

using Kind = JobPhase::Kind;

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

// A scale's failure as the caller sees it: the chief answered, so never UNAVAILABLE (which
// callers read as "the chief is unreachable"): a ps's UNAVAILABLE becomes ABORTED.
absl::Status ScaleError(absl::StatusCode code, absl::string_view message) {
  return absl::Status(code == absl::StatusCode::kUnavailable ? absl::StatusCode::kAborted : code,
                      message);
}

std::string List(const std::vector<std::string>& v) {
  return absl::StrCat("[", absl::StrJoin(v, ", "), "]");
}

}  // namespace

PsScaling::PsScaling(ChiefState* state, SwitchablePsClient* ps, PsMonitor* monitor,
                     Recovery* recovery, CheckpointDriver* checkpoints, Dispatcher* dispatcher,
                     Options options)
    : s_(state),
      ps_(ps),
      monitor_(monitor),
      recovery_(recovery),
      checkpoints_(checkpoints),
      dispatcher_(dispatcher),
      options_(std::move(options)) {}

absl::Status PsScaling::RequestLocked(const ScalePsRequest& request, Done done) {
  PartsLockHeld();
  RETURN_IF_ERROR(s_->CheckJobLocked(request.job_id()));
  const std::string& id = s_->status.job_id();
  if (s_->status.state() != JobStatus::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat("job \"", id, "\" is not running"));
  }
  const int n = request.num_ps();
  const std::vector<std::string> from = s_->ps_addresses;
  const int current = static_cast<int>(from.size());
  if (n < 1) {
    return absl::InvalidArgumentError(absl::StrCat("scale-ps: num_ps must be >= 1, got ", n));
  }
  if (n == current) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale-ps: job \"", id, "\" already runs on ", n, " ps ", List(from)));
  }
  // The new set: the job's first ps, in order, then the given or TF_CONFIG's addresses.
  std::vector<std::string> to(from.begin(), from.begin() + std::min(n, current));
  if (request.ps_addresses_size() > 0) {
    if (request.ps_addresses_size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scale-ps: ps_addresses names ", request.ps_addresses_size(), " ps for num_ps ", n));
    }
    for (int k = 0; k < std::min(n, current); ++k) {
      if (request.ps_addresses(k) != from[k]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "scale-ps: ps_addresses[", k, "] is \"", request.ps_addresses(k), "\", but ps ", k,
            " of the job is \"", from[k], "\": the job's ps keep their indices"));
      }
    }
    for (int k = current; k < n; ++k) to.push_back(request.ps_addresses(k));
  } else {
    for (int k = current; k < n; ++k) {
      if (k >= static_cast<int>(options_.cluster_ps.size())) {
        return absl::InvalidArgumentError(absl::StrCat(
            "scale-ps: ps ", k, " has no address: the chief's TF_CONFIG names ",
            options_.cluster_ps.size(), " ps; give the new ps' addresses (--ps_addresses)"));
      }
      to.push_back(options_.cluster_ps[k]);
    }
  }
  if (std::set<std::string>(to.begin(), to.end()).size() != to.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scale-ps: the new ps set ", List(to), " names a ps twice"));
  }
  if (!options_.connect_ps) {
    return absl::UnimplementedError("scale-ps: this chief cannot connect to other ps");
  }
  if (request.live()) {
    if (n < current && (s_->dense_ps == 0 || n < s_->dense_ps)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "scale-ps --live removes only ps added live, which hold nothing but dynamic tables; "
          "job \"", id, "\" has dense variables on ps ", n, " (its first ",
          s_->dense_ps == 0 ? current : s_->dense_ps,
          " ps hold them): remove it through a checkpoint (scale-ps ", n, " without --live)"));
    }
    if (request.per_switch() < 0 || request.pause_ms() < 0 || request.pause_ms() > 60000) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scale-ps --live: per_switch must be >= 0 and pause_ms in [0, 60000], got ",
          request.per_switch(), " and ", request.pause_ms()));
    }
    int tables = 0;
    for (const VariableDef& def : s_->defs) {
      if (!def.dynamic.has_value()) continue;
      ++tables;
      if (def.dynamic->max_rows > 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "scale-ps --live: dynamic table \"", def.name, "\" has a row budget (max_rows ",
            def.dynamic->max_rows, ", fixed per shard), so its buckets cannot move; scale "
            "through a checkpoint (without --live)"));
      }
    }
    if (tables == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "scale-ps --live adds ps for dynamic tables, and job \"", id, "\" has none; scale "
          "through a checkpoint (without --live)"));
    }
  } else if (s_->store == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "scale-ps: job \"", id, "\" has no checkpoint directory (job file field "
        "\"checkpoint.dir\", or the chief's --checkpoint_dir): a scale moves the shards "
        "through a checkpoint"));
  }
  if (s_->scheduler->Finished() || s_->phase.final_checkpoint_done()) {
    return absl::FailedPreconditionError(
        absl::StrCat("scale-ps: job \"", id, "\" has done its training"));
  }
  if (queued_.has_value() || running_) {
    return absl::FailedPreconditionError(
        absl::StrCat("scale-ps: job \"", id, "\" is already being scaled to ",
                     queued_.has_value() ? queued_->to.size() : running_to_,
                     " ps; wait for that scale to end"));
  }
  if (recovery_->pending() || s_->phase.kind() == Kind::kRecovering ||
      s_->phase.kind() == Kind::kPsUnreachable) {
    return absl::FailedPreconditionError(absl::StrCat(
        "scale-ps: job \"", id, "\" is recovering (", s_->phase.Text(),
        recovery_->pending() ? recovery_->cause() : std::string(),
        "); scale once it trains again"));
  }
  queued_ = Queued{request, std::move(to), std::move(done), absl::Now()};
  s_->WakeControlLocked();
  return absl::OkStatus();
}

void PsScaling::FailRequestsLocked() {
  if (!queued_.has_value()) return;
  Done done = std::move(queued_->done);
  queued_.reset();
  Answer(std::move(done), absl::FailedPreconditionError(absl::StrCat(
                              "job \"", s_->status.job_id(), "\" is not running")));
}

void PsScaling::Answer(Done done, absl::StatusOr<ScalePsResponse> outcome) {
  s_->mu.Unlock();
  done(std::move(outcome));
  s_->mu.Lock();
}

absl::StatusOr<std::shared_ptr<PsClient>> PsScaling::ReachLocked(const Queued& q) {
  const absl::Duration timeout = q.request.timeout_ms() > 0
                                     ? absl::Milliseconds(q.request.timeout_ms())
                                     : options_.default_timeout;
  const std::vector<VariableDef> defs = s_->defs;
  const std::vector<std::string> from = s_->ps_addresses;
  s_->mu.Unlock();
  absl::StatusOr<std::shared_ptr<PsClient>> client = options_.connect_ps(q.to);
  std::vector<absl::Status> statuses;
  std::vector<HealthResponse> health;
  absl::Status reached = client.status();
  const absl::Time deadline = absl::Now() + timeout;
  while (reached.ok()) {
    (*client)->HealthEach(/*from_chief=*/true, absl::Seconds(2), &statuses, &health);
    int down = -1;
    for (size_t k = 0; k < statuses.size(); ++k) {
      if (!statuses[k].ok()) {
        down = static_cast<int>(k);
        break;
      }
    }
    if (down < 0) break;
    if (absl::Now() >= deadline) {
      reached = absl::DeadlineExceededError(absl::StrCat(
          "ps ", down, " (", q.to[down], ") did not answer within ",
          absl::FormatDuration(timeout), ": ", statuses[down].message()));
      break;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  s_->mu.Lock();
  RETURN_IF_ERROR(reached);
  // Room for the job's shards: what each ps may still allocate, plus what this job holds
  // there now (dropped before the new layout is created).
  int64_t available = 0;
  bool unbounded = false;
  for (size_t k = 0; k < health.size(); ++k) {
    if (health[k].memory_budget_bytes() <= 0) unbounded = true;
    available += health[k].memory_available_bytes();
    if (k < from.size() && from[k] == q.to[k]) available += health[k].bytes();
  }
  const int64_t need = JobBytes(defs);
  if (!unbounded && need > available) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "scale-ps ", q.to.size(), ": the job's shards need ", need,
        " bytes of parameters and optimizer slots; ps ", List(q.to), " can hold ", available,
        " (their --memory_budget_bytes less the snapshot reserve, with what this job holds "
        "on them now)"));
  }
  return client;
}

void PsScaling::RunLocked() {
  PartsLockHeld();
  Queued q = std::move(*queued_);
  queued_.reset();
  running_ = true;
  running_to_ = q.to.size();
  const int from_n = static_cast<int>(s_->ps_addresses.size());
  const int to_n = static_cast<int>(q.to.size());
  LogInfo() << "scale-ps " << to_n << ": job " << s_->status.job_id() << " from " << from_n
            << " ps " << List(s_->ps_addresses) << " to " << List(q.to);
  absl::StatusOr<ScalePsResponse> outcome;
  absl::StatusOr<std::shared_ptr<PsClient>> to = ReachLocked(q);
  if (!to.ok()) {
    outcome = ScaleError(to.status().code(), to.status().message());
  } else if (s_->stopping || s_->status.state() != JobStatus::RUNNING ||
             s_->phase.kind() != Kind::kTraining || recovery_->pending()) {
    outcome = absl::FailedPreconditionError(absl::StrCat(
        "scale-ps: the job stopped training while the new ps were reached",
        s_->phase.Text().empty() ? "" : " (", s_->phase.Text(),
        s_->phase.Text().empty() ? "" : ")"));
  } else if (q.request.live()) {
    outcome = to_n > from_n ? AddLiveLocked(q, *std::move(to))
                            : RemoveLiveLocked(q, *std::move(to));
  } else {
    const absl::Time paused = absl::Now();
    absl::StatusOr<CheckpointInfo> cut = checkpoints_->TakeForScaleLocked(
        absl::StrCat("moving onto ", to_n, " ps: the cut"));
    if (!cut.ok()) {
      if (s_->phase.kind() == Kind::kScaling) {  // snapshotted, not committed
        s_->scheduler->ClearBarrier();
        s_->ReleasePhaseLocked(Kind::kScaling);
      }
      outcome = ScaleError(cut.status().code(),
                           absl::StrCat("scale-ps: the checkpoint to move through: ",
                                        cut.status().message()));
    } else {
      outcome = MoveLocked(q, *std::move(to), *cut, paused);
    }
  }
  running_ = false;
  ScalePsResponse record;
  if (outcome.ok()) {
    ++scales_;
    record = *outcome;
  } else {
    ++failed_;
    record.set_from_ps(from_n);
    record.set_to_ps(to_n);
    record.set_live(q.request.live());
    record.set_layout_version(s_->layout_version);
    record.set_error(std::string(outcome.status().message()));
    LogWarning() << "scale-ps " << to_n << " failed: " << outcome.status();
  }
  record.set_seconds(absl::ToDoubleSeconds(absl::Now() - q.asked));
  record.set_unix_time(UnixSeconds(absl::Now()));
  if (outcome.ok()) *outcome = record;
  last_ = record;
  s_->WakeDispatcherLocked();
  Answer(std::move(q.done), std::move(outcome));
}

absl::StatusOr<ScalePsResponse> PsScaling::MoveLocked(const Queued& q,
                                                      std::shared_ptr<PsClient> to,
                                                      const CheckpointInfo& cut,
                                                      absl::Time paused) {
  PartsLockHeld();
  const std::vector<std::string> from = s_->ps_addresses;
  const int64_t old_version = s_->layout_version;
  const int to_n = static_cast<int>(q.to.size());
  // A generation no ps of either set is at: the restore fences off anything older.
  int64_t generation = s_->generation;
  for (const PsMonitor::PsView& v : monitor_->Views()) {
    generation = std::max(generation, v.generation);
  }
  {
    std::vector<absl::Status> statuses;
    std::vector<HealthResponse> health;
    s_->mu.Unlock();
    to->HealthEach(/*from_chief=*/true, absl::Seconds(2), &statuses, &health);
    s_->mu.Lock();
    for (size_t k = 0; k < health.size(); ++k) {
      if (statuses[k].ok()) generation = std::max(generation, health[k].generation());
    }
  }
  ++generation;

  // The journal first: a chief that dies from here on resumes on the new layout (every
  // variable over every ps of it).
  const int old_dense_ps = s_->dense_ps;
  s_->dense_ps = 0;
  RecordLayoutLocked(q.to, old_version + 1, generation);
  std::shared_ptr<PsClient> old = ps_->Switch(to);
  s_->ps_addresses = q.to;
  s_->layout_version = old_version + 1;
  s_->generation = generation;
  monitor_->Reset();
  s_->SetPhaseLocked(Kind::kScaling,
                     absl::StrCat("restoring checkpoint ", cut.id(), " (step ", cut.steps_done(),
                                  ") onto ", to_n, " ps, generation ", generation));
  const JobSpec job = s_->job;
  const std::vector<VariableDef> defs = s_->defs;
  const JobStore* store = s_->store.get();
  s_->mu.Unlock();
  absl::StatusOr<RollbackOutcome> restored = RollBack(*ps_, job, defs, store, generation);
  std::vector<absl::Status> statuses;
  std::vector<HealthResponse> health;
  if (restored.ok()) ps_->HealthEach(/*from_chief=*/true, absl::Seconds(5), &statuses, &health);
  s_->mu.Lock();
  absl::Status moved = restored.status();
  for (size_t k = 0; moved.ok() && k < statuses.size(); ++k) {
    if (!statuses[k].ok()) {
      moved = absl::UnavailableError(absl::StrCat("ps ", k, " (", q.to[k],
                                                  ") failed after the restore: ",
                                                  statuses[k].message()));
    }
  }
  if (moved.ok() && restored->checkpoint_id != cut.id()) {
    moved = absl::DataLossError(absl::StrCat(
        "the restore took checkpoint ", restored->checkpoint_id, ", not the scale's cut ",
        cut.id(), restored->skipped.empty() ? "" : ": ",
        absl::StrJoin(restored->skipped, "; ")));
  }
  if (!moved.ok()) {
    // Back to the old layout; the recovery rolls the old ps back to the cut.
    ps_->Switch(old);
    s_->ps_addresses = from;
    s_->layout_version = old_version;
    s_->dense_ps = old_dense_ps;
    RecordLayoutLocked(from, old_version, generation);
    monitor_->Reset();
    std::vector<std::string> added;
    for (const std::string& a : q.to) {
      if (std::find(from.begin(), from.end(), a) == from.end()) added.push_back(a);
    }
    const std::string cause =
        absl::StrCat("the move onto ", to_n, " ps failed (", moved.message(), "); back on ",
                     from.size(), " ps");
    s_->scheduler->ClearBarrier();
    recovery_->RollBackDueLocked(cause);
    s_->SetPhaseLocked(Kind::kRecovering, cause);
    RetireLocked(added, /*shutdown=*/false, cause);
    // The move was given up: ABORTED, whatever the ps said (its error is in the message).
    return absl::AbortedError(absl::StrCat("scale-ps ", to_n, ": ", cause));
  }

  // Training continues from the cut, on the new ps.
  std::vector<uint64_t> incarnations;
  for (const HealthResponse& h : health) incarnations.push_back(h.incarnation());
  recovery_->StartJobLocked(std::move(incarnations));
  const absl::Status requeued =
      s_->scheduler->Restore(restored->steps_done, {}, s_->scheduler->total_steps());
  if (!requeued.ok()) {
    s_->EndJobLocked(JobStatus::FAILED, absl::StrCat("scale-ps: ", requeued.message()));
    return requeued;
  }
  s_->store_state.generation_start_steps = restored->steps_done;
  s_->WriteStateLocked();
  absl::Status journal = s_->store->StartJournal(generation);
  if (!journal.ok()) LogWarning() << "step journal: " << journal;
  checkpoints_->RolledBackLocked();
  dispatcher_->RestartJobLocked();
  s_->ReleasePhaseLocked(Kind::kScaling);
  s_->WakeDispatcherLocked();

  ScalePsResponse response;
  response.set_from_ps(static_cast<int>(from.size()));
  response.set_to_ps(to_n);
  response.set_layout_version(s_->layout_version);
  response.set_checkpoint_id(cut.id());
  response.set_steps_done(restored->steps_done);
  response.set_bytes_moved(cut.bytes());
  response.set_pause_s(absl::ToDoubleSeconds(absl::Now() - paused));
  LogInfo() << "scale-ps " << to_n << ": job " << s_->status.job_id() << " runs on " << to_n
            << " ps " << List(q.to) << " (layout version " << s_->layout_version
            << ", generation " << generation << ") from step " << restored->steps_done
            << " of checkpoint " << cut.id() << "; " << cut.bytes() << " bytes moved, paused "
            << response.pause_s() << " s";

  std::vector<std::string> removed(from.begin() + std::min<size_t>(from.size(), to_n),
                                   from.end());
  RetireLocked(removed, /*shutdown=*/true,
               absl::StrCat("scaled down to ", to_n, " ps: this ps holds nothing of the job"));
  return response;
}

absl::StatusOr<ScalePsResponse> PsScaling::AddLiveLocked(const Queued& q,
                                                         std::shared_ptr<PsClient> to) {
  PartsLockHeld();
  const std::vector<std::string> from = s_->ps_addresses;
  const int from_n = static_cast<int>(from.size());
  const int to_n = static_cast<int>(q.to.size());
  const int64_t generation = s_->generation;
  const std::vector<std::string> tables = DynamicTableNames(s_->defs);
  const std::vector<std::string> added(q.to.begin() + from_n, q.to.end());
  auto given_up = [&](const absl::Status& why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    PartsLockHeld();
    if (s_->phase.kind() == Kind::kScaling) s_->ReleasePhaseLocked(Kind::kScaling);
    EndStepDrainLocked(s_);
    RetireLocked(added, /*shutdown=*/false, "a live scale that did not happen");
    return ScaleError(why.code(), absl::StrCat("scale-ps ", to_n, " --live: ", why.message(),
                                               "; the job runs on as it was, on ", from_n,
                                               " ps"));
  };

  // 1. The new ps at the job's generation; a step boundary (no step in flight, none leased).
  s_->mu.Unlock();
  absl::Status fenced = to->SetGenerationAll(generation);
  s_->mu.Lock();
  if (!fenced.ok()) return given_up(fenced);
  const absl::Time paused = absl::Now();
  const absl::Status drained = DrainToStepBoundaryLocked(s_, recovery_);
  if (!drained.ok()) return given_up(drained);
  const int64_t boundary = s_->scheduler->DonePrefix();
  s_->SetPhaseLocked(Kind::kScaling, absl::StrCat("adding ", to_n - from_n, " ps live at step ",
                                                  boundary, ": ", List(added)));

  // 2. Each table's empty shard on each new ps, where the table's shards are.
  s_->mu.Unlock();
  absl::Status created;
  for (const std::string& table : tables) {
    ListShardsRequest list;
    list.set_variable(table);
    std::vector<ListShardsResponse> listed;
    created = ps_->ListShardsAll(list, &listed);
    if (!created.ok()) break;
    int64_t version = 0, routing = 0;
    const ShardInfo* last = nullptr;
    int shards = 0;
    for (const ListShardsResponse& r : listed) {
      for (const ShardInfo& info : r.shards()) {
        ++shards;
        version = std::max(version, info.version());
        routing = std::max(routing, info.routing_version());
        if (last == nullptr || info.spec().part() > last->spec().part()) last = &info;
      }
    }
    if (last == nullptr || shards != from_n) {
      created = absl::FailedPreconditionError(absl::StrCat(
          "dynamic table \"", table, "\" has ", shards, " shards on the job's ", from_n,
          " ps, not one per ps"));
      break;
    }
    for (int k = from_n; k < to_n && created.ok(); ++k) {
      CreateShardsRequest request;
      ShardSpec& spec = *request.add_shards();
      spec = last->spec();
      spec.set_name(absl::StrCat(table, "/part_", k));
      spec.set_part(k);
      spec.set_num_parts(to_n);
      spec.mutable_dynamic()->set_bucket_begin(spec.dynamic().num_buckets());
      spec.mutable_dynamic()->set_bucket_end(spec.dynamic().num_buckets());
      request.set_start_version(version);
      request.set_routing_version(routing);
      CreateShardsResponse response;
      created = to->CreateShards(k, request, &response);
    }
    if (!created.ok()) break;
    // Each new shard where the table is: a ps of a release that does not know start_version
    // would have made it at version 0, and a sync table would wait for it for ever.
    std::vector<ListShardsResponse> now;
    created = to->ListShardsAll(list, &now);
    for (int k = from_n; k < to_n && created.ok(); ++k) {
      bool found = false;
      for (const ShardInfo& info : now[static_cast<size_t>(k)].shards()) {
        if (info.spec().part() != k) continue;
        found = info.version() == version && info.routing_version() == routing;
      }
      if (!found) {
        created = absl::FailedPreconditionError(absl::StrCat(
            "ps ", k, " (", q.to[static_cast<size_t>(k)], ") did not make the shard of \"",
            table, "\" at version ", version, " and routing version ", routing,
            " (a ps of an older release?)"));
      }
    }
    if (!created.ok()) break;
  }
  s_->mu.Lock();
  if (!created.ok()) return given_up(created);
  if (s_->stopping || s_->status.state() != JobStatus::RUNNING || recovery_->pending()) {
    return given_up(absl::FailedPreconditionError(
        "the job stopped or needs a recovery while the new shards were created"));
  }

  // 3. The journal, then the switch: clients of the new ps set, every worker started again.
  // The dense variables stay on the ps they are on, for a rollback too.
  const int64_t old_version = s_->layout_version;
  if (s_->dense_ps == 0) s_->dense_ps = from_n;
  RecordLayoutLocked(q.to, old_version + 1, generation);
  std::shared_ptr<PsClient> old = ps_->Switch(to);
  s_->ps_addresses = q.to;
  s_->layout_version = old_version + 1;
  monitor_->Reset();
  s_->mu.Unlock();
  absl::Status switched = ps_->Discover();
  std::vector<absl::Status> statuses;
  std::vector<HealthResponse> health;
  if (switched.ok()) ps_->HealthEach(/*from_chief=*/true, absl::Seconds(5), &statuses, &health);
  s_->mu.Lock();
  for (size_t k = 0; switched.ok() && k < statuses.size(); ++k) {
    if (!statuses[k].ok()) {
      switched = absl::UnavailableError(
          absl::StrCat("ps ", k, " (", q.to[k], "): ", statuses[k].message()));
    }
  }
  if (!switched.ok()) {
    // The journal names the new ps set: the recovery puts every ps of it into the
    // partitioner's layout and restores the newest checkpoint there.
    const std::string cause = absl::StrCat("adding ps live failed after the switch (",
                                           switched.message(), ")");
    EndStepDrainLocked(s_);
    recovery_->RollBackDueLocked(cause);
    s_->SetPhaseLocked(Kind::kRecovering, cause);
    return absl::AbortedError(absl::StrCat("scale-ps ", to_n, " --live: ", cause));
  }
  std::vector<uint64_t> incarnations;
  for (const HealthResponse& h : health) incarnations.push_back(h.incarnation());
  recovery_->PsAddedLocked(std::move(incarnations));
  dispatcher_->RestartJobLocked();
  s_->ReleasePhaseLocked(Kind::kScaling);
  EndStepDrainLocked(s_);
  ScalePsResponse response;
  response.set_live(true);
  response.set_from_ps(from_n);
  response.set_to_ps(to_n);
  response.set_layout_version(s_->layout_version);
  response.set_steps_done(boundary);
  response.set_tables(static_cast<int>(tables.size()));
  response.set_pause_s(absl::ToDoubleSeconds(absl::Now() - paused));
  LogInfo() << "scale-ps " << to_n << " --live: job " << s_->status.job_id() << " runs on "
            << to_n << " ps " << List(q.to) << " (layout version " << s_->layout_version
            << ") from step " << boundary << "; " << tables.size()
            << " dynamic tables have an empty shard on each new ps; paused "
            << response.pause_s() << " s; balancing them";

  // 4. Each table's buckets balanced onto the new shards while the job trains.
  const absl::Time balance_start = absl::Now();
  absl::Status balanced = BalanceLocked(q, tables, &response);
  response.set_balance_s(absl::ToDoubleSeconds(absl::Now() - balance_start));
  if (!balanced.ok()) {
    return absl::AbortedError(absl::StrCat(
        "scale-ps ", to_n, " --live: the job runs on ", to_n, " ps (layout version ",
        s_->layout_version, "), but ", balanced.message()));
  }
  LogInfo() << "scale-ps " << to_n << " --live: balanced " << response.buckets_moved()
            << " buckets (" << response.rows_moved() << " rows, " << response.bytes_moved()
            << " bytes) onto the new ps in " << response.balance_s() << " s";
  return response;
}

BucketMoveOptions PsScaling::MoveOptionsLocked(const ScalePsRequest& request) {
  BucketMoveOptions options;
  options.buckets_per_switch = request.per_switch() > 0 ? request.per_switch() : 64;
  options.pause = absl::Milliseconds(request.pause_ms());
  options.generation = s_->generation;
  SwitchAtStepBoundaries(s_, recovery_, &options);
  return options;
}

absl::Status PsScaling::BalanceLocked(const Queued& q, const std::vector<std::string>& tables,
                                      ScalePsResponse* response) {
  const BucketMoveOptions options = MoveOptionsLocked(q.request);
  for (const std::string& table : tables) {
    s_->mu.Unlock();
    absl::StatusOr<BalanceStats> b = BalanceTableBuckets(ps_, table, 0.1, options);
    s_->mu.Lock();
    if (!b.ok()) {
      return absl::AbortedError(absl::StrCat("balancing \"", table, "\" failed (",
                                             b.status().message(),
                                             "); run shardctl move-buckets ", table,
                                             " --balance"));
    }
    response->set_buckets_moved(response->buckets_moved() + b->moved.buckets);
    response->set_rows_moved(response->rows_moved() + b->moved.rows);
    response->set_bytes_moved(response->bytes_moved() + b->moved.bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<ScalePsResponse> PsScaling::RemoveLiveLocked(const Queued& q,
                                                            std::shared_ptr<PsClient> to) {
  PartsLockHeld();
  const std::vector<std::string> from = s_->ps_addresses;
  const int from_n = static_cast<int>(from.size());
  const int to_n = static_cast<int>(q.to.size());
  const std::vector<std::string> removed(from.begin() + to_n, from.end());
  const std::vector<std::string> tables = DynamicTableNames(s_->defs);
  auto failed = [&](const absl::Status& why) {
    return ScaleError(why.code(), absl::StrCat("scale-ps ", to_n, " --live: ", why.message(),
                                               "; the job runs on ", from_n, " ps"));
  };
  ScalePsResponse response;
  response.set_live(true);
  response.set_from_ps(from_n);
  response.set_to_ps(to_n);
  response.set_tables(static_cast<int>(tables.size()));

  // 1. Every bucket of the removed ps' shards onto the shards before them, from the last,
  // while the job trains.
  const absl::Time moves_start = absl::Now();
  BucketMoveOptions options = MoveOptionsLocked(q.request);
  options.may_empty_source = true;
  for (const std::string& table : tables) {
    for (int k = from_n - 1; k >= to_n; --k) {
      s_->mu.Unlock();
      std::optional<BucketMoveStats> moved;  // none when the shard holds no bucket
      absl::Status s = ps_->Discover();
      absl::StatusOr<VariableLayout> layout =
          s.ok() ? ps_->GetLayout(table) : absl::StatusOr<VariableLayout>(s);
      if (layout.ok()) {
        // Ps k's shard must be the table's k-th in bucket order (as a live add and the
        // partitioner leave it); move-buckets can make it otherwise.
        const int shards = static_cast<int>(layout->shards.size());
        if (shards != from_n || layout->shards[k].ps != k) {
          s = absl::FailedPreconditionError(absl::StrCat(
              "the shard of table \"", table, "\" on ps ", k, " is not its shard ", k,
              " in bucket order (bucket moves placed it so); remove the ps through a "
              "checkpoint (without --live)"));
        } else {
          const BucketRange r = layout->shards[k].buckets;
          if (r.end > r.begin) {
            absl::StatusOr<BucketMoveStats> m =
                MoveTableBuckets(ps_, table, k, k - 1, r.end - r.begin, options);
            s = m.status();
            if (m.ok()) moved = *m;
          }
        }
      } else {
        s = layout.status();
      }
      s_->mu.Lock();
      if (!s.ok()) {
        return failed(absl::Status(s.code(), absl::StrCat("moving the buckets of \"", table,
                                                         "\" off ps ", k, ": ", s.message())));
      }
      if (moved.has_value()) {
        response.set_buckets_moved(response.buckets_moved() + moved->buckets);
        response.set_rows_moved(response.rows_moved() + moved->rows);
        response.set_bytes_moved(response.bytes_moved() + moved->bytes);
      }
    }
  }
  const absl::Duration emptied = absl::Now() - moves_start;

  // 2. A step boundary: the empty shards take no more pushes.
  const absl::Time paused = absl::Now();
  const absl::Status drained = DrainToStepBoundaryLocked(s_, recovery_);
  if (!drained.ok()) return failed(drained);
  const int64_t boundary = s_->scheduler->DonePrefix();
  s_->SetPhaseLocked(Kind::kScaling, absl::StrCat("removing ", from_n - to_n,
                                                  " ps live at step ", boundary, ": ",
                                                  List(removed)));

  // 3. The journal, then the switch: clients of the remaining ps, every worker started again.
  const int64_t old_version = s_->layout_version;
  const int old_dense_ps = s_->dense_ps;
  if (s_->dense_ps >= to_n) s_->dense_ps = 0;
  RecordLayoutLocked(q.to, old_version + 1, s_->generation);
  std::shared_ptr<PsClient> old = ps_->Switch(to);
  s_->ps_addresses = q.to;
  s_->layout_version = old_version + 1;
  monitor_->Reset();
  s_->mu.Unlock();
  const absl::Status switched = ps_->Discover();
  s_->mu.Lock();
  if (!switched.ok()) {
    // The remaining ps do not hold the tables whole: back to the ps set it ran on.
    ps_->Switch(old);
    s_->ps_addresses = from;
    s_->layout_version = old_version;
    s_->dense_ps = old_dense_ps;
    RecordLayoutLocked(from, old_version, s_->generation);
    monitor_->Reset();
    s_->ReleasePhaseLocked(Kind::kScaling);
    EndStepDrainLocked(s_);
    return failed(switched);
  }
  recovery_->PsRemovedLocked(static_cast<size_t>(to_n));
  dispatcher_->RestartJobLocked();
  s_->ReleasePhaseLocked(Kind::kScaling);
  EndStepDrainLocked(s_);
  response.set_layout_version(s_->layout_version);
  response.set_steps_done(boundary);
  response.set_pause_s(absl::ToDoubleSeconds(absl::Now() - paused));
  LogInfo() << "scale-ps " << to_n << " --live: job " << s_->status.job_id() << " runs on "
            << to_n << " ps " << List(q.to) << " (layout version " << s_->layout_version
            << ") from step " << boundary << "; " << response.buckets_moved()
            << " buckets moved off " << List(removed) << " in "
            << absl::FormatDuration(emptied) << "; paused " << response.pause_s() << " s";

  // 4. The removed ps drop the job's (empty) shards and exit; the tables balanced again.
  RetireLocked(removed, /*shutdown=*/true,
               absl::StrCat("removed live: scaled down to ", to_n,
                            " ps, this ps holds nothing of the job"));
  const absl::Status balanced = BalanceLocked(q, tables, &response);
  response.set_balance_s(absl::ToDoubleSeconds(absl::Now() - moves_start));
  if (!balanced.ok()) {
    return absl::AbortedError(absl::StrCat("scale-ps ", to_n, " --live: the job runs on ", to_n,
                                           " ps (layout version ", s_->layout_version,
                                           "), but ", balanced.message()));
  }
  return response;
}

void PsScaling::RecordLayoutLocked(const std::vector<std::string>& ps, int64_t version,
                                   int64_t generation) {
  if (s_->store == nullptr) return;
  s_->store_state.ps_addresses = ps;
  s_->store_state.layout_version = version;
  s_->store_state.dense_ps = s_->dense_ps;
  s_->store_state.generation = generation;
  s_->WriteStateLocked();
}

void PsScaling::RetireLocked(const std::vector<std::string>& addresses, bool shutdown,
                             const std::string& why) {
  if (addresses.empty()) return;
  DropShardsRequest drop;
  for (const VariableDef& def : s_->defs) drop.add_variables(def.name);
  s_->mu.Unlock();
  absl::StatusOr<std::shared_ptr<PsClient>> client = options_.connect_ps(addresses);
  absl::Status s = client.status();
  if (s.ok()) s = (*client)->DropShardsAll(drop);
  if (s.ok() && shutdown) s = (*client)->ShutdownAll(why);
  s_->mu.Lock();
  if (!s.ok()) {
    LogWarning() << "ps " << List(addresses) << ": dropping the job's shards"
                 << (shutdown ? " and shutting down" : "") << " failed (" << s
                 << "); they hold nothing the job reads";
  } else {
    LogInfo() << "ps " << List(addresses) << ": the job's shards dropped"
              << (shutdown ? "; told to shut down" : "");
  }
}

void PsScaling::AddToStatusLocked(JobStatus* status) const {
  status->set_layout_version(s_->layout_version);
  status->set_ps_scales(scales_);
  status->set_ps_scales_failed(failed_);
  if (last_.has_value()) *status->mutable_last_scale() = *last_;
}

}  // namespace shardps
