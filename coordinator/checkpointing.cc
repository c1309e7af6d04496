#include "coordinator/checkpointing.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "coordinator/step_failure.h"

namespace shardps {
namespace {

// The optimizer's slots, named as the ps names their tensors ("<shard>/<slot>").
std::vector<std::string> SlotNames(const OptimizerSpec& optimizer) {
  switch (optimizer.type()) {
    case OptimizerSpec::MOMENTUM:
      return {"momentum"};
    case OptimizerSpec::ADAGRAD:
      return {"accumulator"};
    case OptimizerSpec::ADAM:
      return {"adam_m", "adam_v"};
    case OptimizerSpec::FTRL:
      return {"accumulator", "linear"};
    default:
      return {};
  }
}

// A manifest's indexes of what the ps sent: shard versions at the cut (and dynamic shards'
// infos), and the tensor names of each ps's file, by ps and name.
struct ManifestSources {
  explicit ManifestSources(const CheckpointContents& contents)
      : versions(contents.snapshots.size()),
        infos(contents.snapshots.size()),
        tensors(contents.files.size()) {
    for (size_t ps = 0; ps < contents.snapshots.size(); ++ps) {
      for (const ShardInfo& info : contents.snapshots[ps].shards()) {
        versions[ps][info.spec().name()] = info.version();
        infos[ps][info.spec().name()] = &info;
      }
    }
    for (size_t ps = 0; ps < contents.files.size(); ++ps) {
      for (const TensorInfo& t : contents.files[ps].tensors()) tensors[ps][t.name()] = &t;
    }
  }
  std::vector<std::map<std::string, int64_t>> versions;
  std::vector<std::map<std::string, const ShardInfo*>> infos;
  std::vector<std::map<std::string, const TensorInfo*>> tensors;
};

// One shard of `layout` as the manifest lists it: in its ps's snapshot and file, with the
// tensors of its slots (and a dynamic table's extra tensors).
absl::StatusOr<ManifestShard> BuildManifestShard(const CheckpointContents& contents,
                                                 const ManifestSources& sources,
                                                 const VariableLayout& layout,
                                                 const VariableLayout::Shard& shard,
                                                 const std::vector<std::string>& slots) {
  const std::string& name = shard.spec.name();
  const size_t ps = static_cast<size_t>(shard.ps);
  if (ps >= sources.versions.size() || ps >= sources.tensors.size()) {
    return absl::InternalError(absl::StrCat("shard \"", name, "\" is on ps ", shard.ps,
                                            ", which sent no snapshot or file"));
  }
  auto version = sources.versions[ps].find(name);
  if (version == sources.versions[ps].end()) {
    return absl::InternalError(
        absl::StrCat("shard \"", name, "\" is not in ps ", shard.ps, "'s snapshot"));
  }
  const std::map<std::string, const TensorInfo*>& tensors = sources.tensors[ps];
  const std::string& file = contents.files[ps].file();
  if (tensors.count(name) == 0) {
    return absl::InternalError(
        absl::StrCat("shard \"", name, "\" is not in ps ", shard.ps, "'s file ", file));
  }
  ManifestShard s;
  s.name = name;
  s.part = shard.spec.part();
  s.num_parts = std::max(1, shard.spec.num_parts());
  s.row_offset = shard.row_offset;
  s.rows = shard.rows;
  s.ps = shard.ps;
  s.version = version->second;
  s.file = file;
  s.tensors[""] = name;
  // The shard's tensor "<name>/<suffix>" under key `suffix`; it must be in the ps's file.
  auto add = [&](const std::string& suffix) -> absl::Status {
    const std::string tensor = absl::StrCat(name, "/", suffix);
    if (tensors.count(tensor) == 0) {
      return absl::InternalError(
          absl::StrCat("tensor \"", tensor, "\" is not in ps ", shard.ps, "'s file ", file));
    }
    s.tensors[suffix] = tensor;
    return absl::OkStatus();
  };
  for (const std::string& slot : slots) RETURN_IF_ERROR(add(slot));
  if (layout.dynamic) {
    const ShardInfo& info = *sources.infos[ps].at(name);
    s.rows = info.dynamic().rows();
    // The range the shard held at the cut (bucket moves shift it from the chief's layout).
    s.bucket_begin = info.spec().dynamic().bucket_begin();
    s.bucket_end = info.spec().dynamic().bucket_end();
    s.base_checkpoint = info.base_checkpoint();
    for (const char* extra : {kKeysTensor, kLastStepsTensor, kDeletedKeysTensor}) {
      RETURN_IF_ERROR(add(extra));
    }
  }
  return s;
}

absl::StatusOr<ManifestVariable> BuildManifestVariable(const CheckpointContents& contents,
                                                       const ManifestSources& sources,
                                                       const VariableLayout& layout) {
  ManifestVariable v;
  v.name = layout.name;
  v.shape = layout.shape;
  v.partitioner = contents.job.partitioner();
  if (layout.shards.empty()) {
    return absl::InternalError(absl::StrCat("variable \"", layout.name, "\" has no shards"));
  }
  const ShardSpec& first = layout.shards.front().spec;
  v.optimizer = first.optimizer();
  v.initializer = first.initializer();
  v.update = first.update();
  v.slots = SlotNames(v.optimizer);
  if (layout.dynamic) v.num_buckets = layout.num_buckets;
  for (const VariableLayout::Shard& shard : layout.shards) {
    ASSIGN_OR_RETURN(ManifestShard s,
                     BuildManifestShard(contents, sources, layout, shard, v.slots));
    v.shards.push_back(std::move(s));
  }
  return v;
}

double UnixSeconds(absl::Time t) { return absl::ToDoubleSeconds(t - absl::UnixEpoch()); }

}  // namespace

absl::StatusOr<Manifest> BuildManifest(const CheckpointContents& contents, double unix_time) {
  Manifest m;
  m.checkpoint_id = contents.checkpoint_id;
  m.job_id = contents.job_id;
  m.generation = contents.generation;
  m.unix_time = unix_time;
  m.final = contents.final;
  m.job_json = JobSpecToJson(contents.job);
  m.progress.steps_done = contents.steps_done;
  m.progress.total_steps = contents.total_steps;
  m.progress.steps_per_epoch = contents.steps_per_epoch;
  if (contents.steps_per_epoch > 0) {
    m.progress.epoch = contents.steps_done / contents.steps_per_epoch;
    m.progress.batch_index = contents.steps_done % contents.steps_per_epoch;
  }
  m.files = contents.files;
  m.eval = contents.eval;
  const ManifestSources sources(contents);
  for (const VariableLayout& layout : contents.variables) {
    ASSIGN_OR_RETURN(ManifestVariable v, BuildManifestVariable(contents, sources, layout));
    m.variables.push_back(std::move(v));
  }
  return m;
}

absl::StatusOr<CheckpointCut> PrepareCut(const CheckpointDir& dir) {
  CheckpointCut cut;
  ASSIGN_OR_RETURN(cut.id, dir.NextId());
  ASSIGN_OR_RETURN(cut.path, dir.Prepare(cut.id));
  return cut;
}

absl::StatusOr<CheckpointCut> SnapshotEveryPs(PsClient& ps, const CheckpointDir& dir,
                                              int64_t generation, int64_t incremental_since,
                                              std::optional<int64_t> held_from_step) {
  ASSIGN_OR_RETURN(CheckpointCut cut, PrepareCut(dir));
  return SnapshotPrepared(ps, std::move(cut), generation, incremental_since, held_from_step);
}

absl::StatusOr<CheckpointCut> SnapshotPrepared(PsClient& ps, CheckpointCut cut, int64_t generation,
                                               int64_t incremental_since,
                                               std::optional<int64_t> held_from_step) {
  std::vector<std::string> files;
  for (int k = 0; k < ps.num_ps(); ++k) {
    files.push_back(absl::StrCat(cut.path, "/", CheckpointDir::DataFileName(k, ps.num_ps())));
  }
  RETURN_IF_ERROR(
      ps.SnapshotAll(cut.id, files, generation, incremental_since, held_from_step,
                     &cut.snapshots));
  return cut;
}

namespace {

// Waits until every ps has written its file of checkpoint `id`; returns their statuses.
absl::StatusOr<std::vector<SnapshotStatusResponse>> WaitForFiles(
    PsClient& ps, int64_t id, const std::function<bool()>& stopping) {
  std::vector<SnapshotStatusResponse> statuses;
  while (true) {
    RETURN_IF_ERROR(ps.SnapshotStatusAll(id, &statuses));
    bool all_done = true;
    for (int k = 0; k < ps.num_ps(); ++k) {
      const SnapshotStatusResponse& r = statuses[k];
      switch (r.state()) {
        case SnapshotStatusResponse::DONE:
          break;
        case SnapshotStatusResponse::WRITING:
          all_done = false;
          break;
        case SnapshotStatusResponse::FAILED:
          return absl::InternalError(
              absl::StrCat("ps ", k, " could not write its file: ", r.error()));
        default:
          return WithDetail(absl::AbortedError(absl::StrCat("ps ", k,
                                                            " no longer knows checkpoint ", id,
                                                            " (it restarted)")),
                            ErrorDetail::PS_STATE_LOST, k);
      }
    }
    if (all_done) return statuses;
    if (stopping && stopping()) return absl::CancelledError("the chief is stopping");
    absl::SleepFor(absl::Milliseconds(20));
  }
}

}  // namespace

absl::StatusOr<CheckpointInfo> CommitCheckpoint(PsClient& ps, const CheckpointDir& dir,
                                                const CheckpointCut& cut,
                                                CheckpointContents contents,
                                                const std::vector<std::string>& variables,
                                                const CommitOptions& options) {
  ASSIGN_OR_RETURN(std::vector<SnapshotStatusResponse> statuses,
                   WaitForFiles(ps, cut.id, options.stopping));
  contents.checkpoint_id = cut.id;
  contents.snapshots = cut.snapshots;
  int64_t bytes = 0;
  for (const SnapshotStatusResponse& r : statuses) {
    contents.files.push_back(r.file());
    bytes += r.file().bytes();
  }
  for (const std::string& name : variables) {
    ASSIGN_OR_RETURN(VariableLayout layout, ps.GetLayout(name));
    contents.variables.push_back(std::move(layout));
  }
  const absl::Time now = absl::Now();
  ASSIGN_OR_RETURN(Manifest manifest, BuildManifest(contents, UnixSeconds(now)));
  RETURN_IF_ERROR(dir.Commit(manifest));
  absl::Status pruned = dir.Prune(options.keep, options.keep_also, contents.generation);
  if (!pruned.ok()) LogWarning() << "pruning old checkpoints: " << pruned;
  CheckpointInfo info;
  info.set_id(cut.id);
  info.set_path(cut.path);
  info.set_steps_done(contents.steps_done);
  info.set_unix_time(UnixSeconds(now));
  info.set_bytes(bytes);
  info.set_write_seconds(absl::ToDoubleSeconds(now - options.started));
  info.set_pause_ms(options.pause_ms);
  info.set_final(contents.final);
  return info;
}

// ---------------------------------------------------------------------------------------
// CheckpointDriver

namespace {
using Kind = JobPhase::Kind;
constexpr char kInterrupted[] = "interrupted";
constexpr char kOnDemand[] = "on demand";
// The longest wait between two attempts at a final checkpoint that failed on the disk.
constexpr absl::Duration kFinalRetryMax = absl::Seconds(30);
}  // namespace

CheckpointDriver::CheckpointDriver(ChiefState* state, Recovery* recovery, PsClient* ps)
    : s_(state), recovery_(recovery), ps_(ps) {}

void CheckpointDriver::StartJobLocked() {
  incremental_base_ = 0;
  increments_ = 0;
  final_retry_at_ = absl::InfinitePast();
  final_failures_ = 0;
  last_checkpoint_steps_ = s_->scheduler->done_steps();
  last_checkpoint_time_ = absl::Now();
}

void CheckpointDriver::RolledBackLocked() {
  incremental_base_ = 0;  // the restored ps hold no record of earlier cuts
  increments_ = 0;
  last_checkpoint_steps_ = s_->scheduler->done_steps();
}

void CheckpointDriver::RequestLocked(Done done) {
  requests_.push_back(Request{kOnDemand, std::move(done)});
}

void CheckpointDriver::RequestInterruptLocked(Done done) {
  requests_.push_back(Request{kInterrupted, std::move(done)});
}

void CheckpointDriver::FailRequestsLocked() {
  if (requests_.empty()) return;
  std::vector<Request> requests = std::move(requests_);
  requests_.clear();
  const absl::Status s = absl::FailedPreconditionError(
      absl::StrCat("job \"", s_->status.job_id(), "\" is not running"));
  s_->mu.Unlock();
  for (Request& r : requests) r.done(s);
  s_->mu.Lock();
}

const char* CheckpointDriver::DueLocked() const {
  if (s_->store == nullptr) return nullptr;
  for (const Request& r : requests_) {
    if (r.why == kInterrupted) return kInterrupted;
  }
  if (!requests_.empty()) return kOnDemand;
  if (s_->scheduler->Finished()) {
    return s_->phase.final_checkpoint_done() || absl::Now() < final_retry_at_ ? nullptr
                                                                             : "final";
  }
  const CheckpointSpec& spec = s_->job.checkpoint();
  const int64_t done = s_->scheduler->done_steps();
  if (done == last_checkpoint_steps_) return nullptr;
  // Once every step is leased, a periodic checkpoint would be cut at the last step, the same
  // cut as the final one's: it is taken as the final one, not written twice.
  const bool at_end =
      s_->scheduler->RoundUp(s_->scheduler->NextNew()) >= s_->scheduler->total_steps();
  if (spec.every_steps() > 0 && done - last_checkpoint_steps_ >= spec.every_steps()) {
    return at_end ? "final" : "every_steps";
  }
  if (spec.every_seconds() > 0 &&
      absl::Now() - last_checkpoint_time_ >= absl::Seconds(spec.every_seconds())) {
    return at_end ? "final" : "every_seconds";
  }
  return nullptr;
}

void CheckpointDriver::RunLocked(const std::string& why) {
  const bool final = why == "final";
  std::vector<Request> requests = std::move(requests_);
  requests_.clear();
  absl::StatusOr<CheckpointInfo> info = TakeLocked(final);
  last_checkpoint_time_ = absl::Now();  // a failed one is not retried at once either
  RecordLocked(why, info);
  if (final && FinalDoneLocked(info)) {
    s_->SetPhaseLocked(Kind::kTrainingDone);
    s_->store_state.finished = true;
    s_->store_state.final_checkpoint = info->id();
    s_->WriteStateLocked();
    s_->WakeDispatcherLocked();
  }
  if (!requests.empty()) {
    s_->mu.Unlock();
    for (Request& r : requests) r.done(info);
    s_->mu.Lock();
  }
}

void CheckpointDriver::RecordLocked(const std::string& why,
                                    const absl::StatusOr<CheckpointInfo>& info) {
  if (info.ok()) {
    last_checkpoint_steps_ = info->steps_done();
    *s_->status.mutable_last_checkpoint() = *info;
    s_->status.set_has_checkpoint(true);
    s_->status.clear_checkpoint_error();
    LogInfo() << "checkpoint " << info->id() << " (" << why << ") committed at step "
              << info->steps_done() << ": " << info->bytes() << " bytes in "
              << info->write_seconds() << " s, training paused " << info->pause_ms()
              << " ms";
    return;
  }
  // Nor by steps: the next attempt is due every_steps after this one, not at the next wake
  // of the control thread (a full disk would otherwise cut the job at a barrier for a
  // checkpoint after every step).
  last_checkpoint_steps_ = s_->scheduler->done_steps();
  s_->status.set_checkpoint_error(
      absl::StrCat("checkpoint (", why, ") failed: ", info.status().message()));
  LogWarning() << s_->status.checkpoint_error();
}

bool CheckpointDriver::FinalDoneLocked(const absl::StatusOr<CheckpointInfo>& info) {
  if (info.ok()) return true;
  // A ps that lost its state (it restarted) or cannot be reached holds the trained model,
  // or held it: the job does not end on it. A restarted ps rolls the job back to the last
  // checkpoint (its steps run again, then the final checkpoint); an unreachable one pauses
  // the job until it answers, and the final checkpoint is taken again then.
  const StepFailure failure = ClassifyStepFailure(info.status());
  RecoveryLockHeld();
  if (failure.kind == StepFailureKind::kPsStateLost) {
    recovery_->PsStateLostLocked(failure.ps_task, absl::StrCat("during the final checkpoint: ",
                                                               info.status().message()));
  } else if (failure.kind == StepFailureKind::kPsUnavailable) {
    recovery_->ProbeNow();
  } else {
    // The disk (full, read-only) or another cause: the ps hold the only copy of the trained
    // model, so the job does not end without it (it would end SUCCEEDED with the newest
    // durable state far behind). Taken again, backing off, until it commits or the job is
    // cancelled; the ps keep their state meanwhile.
    const absl::Duration wait =
        std::min(kFinalRetryMax, absl::Seconds(1) * (int64_t{1} << std::min(final_failures_, 5)));
    ++final_failures_;
    final_retry_at_ = absl::Now() + wait;
    s_->status.set_checkpoint_error(absl::StrCat(
        s_->status.checkpoint_error(), "; the ps keep the trained state: the final checkpoint "
        "is taken again in ", absl::FormatDuration(wait), " (attempt ", final_failures_,
        " failed) until it commits or the job is cancelled (shardctl cancel)"));
    LogWarning() << "final checkpoint failed " << final_failures_ << " time(s); taken again in "
                 << wait << ": the job ends only once it commits or is cancelled";
    return false;
  }
  final_retry_at_ = absl::Now() + absl::Seconds(1);
  return false;
}

absl::StatusOr<CheckpointInfo> CheckpointDriver::TakeForScaleLocked(const std::string& detail) {
  absl::StatusOr<CheckpointInfo> info = TakeLocked(/*final=*/false, &detail);
  last_checkpoint_time_ = absl::Now();
  RecordLocked("scale", info);
  return info;
}

absl::StatusOr<CheckpointInfo> CheckpointDriver::TakeLocked(bool final,
                                                           const std::string* scale_detail) {
  const absl::Time t0 = absl::Now();
  // The checkpoint's directory first (a create and a directory fsync), so that training does
  // not wait for the disk at the cut. A cut given up leaves it to the next Prepare of its id.
  const CheckpointDir dir = s_->store->dir();
  s_->mu.Unlock();
  absl::StatusOr<CheckpointCut> prepared = PrepareCut(dir);
  s_->mu.Lock();
  RETURN_IF_ERROR(prepared.status());
  const absl::Time cut_start = absl::Now();
  ASSIGN_OR_RETURN(const Cut at, CutLocked(final, /*drain=*/scale_detail != nullptr));
  const absl::Time below_done = absl::Now();
  Plan plan = PlanLocked(final, at.barrier);

  // The cut: every ps snapshots (references to its blocks), then leasing resumes, and what
  // the ps held is applied.
  s_->mu.Unlock();
  absl::StatusOr<CheckpointCut> cut =
      SnapshotPrepared(*ps_, *std::move(prepared), plan.contents.generation,
                       plan.incremental_since,
                       at.held ? std::optional<int64_t>(at.barrier) : std::nullopt);
  s_->mu.Lock();
  if (at.held && !cut.ok()) ReleaseHoldLocked();  // a ps that did not snapshot still holds
  LogInfo() << "checkpoint cut at step " << at.barrier << (at.held ? " (pushes held)" : " (drained)")
            << ": steps below it done in "
            << absl::ToDoubleMilliseconds(below_done - cut_start) << " ms, snapshot "
            << absl::ToDoubleMilliseconds(absl::Now() - below_done) << " ms";
  if (scale_detail != nullptr && cut.ok() && s_->SetPhaseLocked(Kind::kScaling, *scale_detail)) {
    // The scale goes on from this cut: nothing more is leased until it ends.
  } else {
    s_->scheduler->ClearBarrier();
    s_->ReleasePhaseLocked(Kind::kCheckpointCut);
    s_->WakeDispatcherLocked();
  }
  RETURN_IF_ERROR(cut.status());

  // The files: each ps writes its own; wait for all of them, then commit.
  CommitOptions options;
  options.keep = plan.keep;
  options.keep_also = plan.best;
  options.started = t0;
  options.pause_ms = absl::ToDoubleMilliseconds(absl::Now() - cut_start);
  options.stopping = [this] {
    absl::MutexLock lock(&s_->mu);
    return s_->stopping;
  };
  const int64_t generation = plan.contents.generation;
  s_->mu.Unlock();
  absl::StatusOr<CheckpointInfo> info = CommitCheckpoint(
      *ps_, *plan.dir, *cut, std::move(plan.contents), plan.variables, options);
  s_->mu.Lock();
  if (info.ok() && s_->generation == generation) {
    // The base of the next increment; a ps that wrote a shard whole restarts the count.
    bool any_increment = false;
    for (const SnapshotResponse& r : cut->snapshots) {
      for (const ShardInfo& shard : r.shards()) any_increment |= shard.base_checkpoint() > 0;
    }
    incremental_base_ = cut->id;
    increments_ = any_increment ? increments_ + 1 : 0;
  }
  return info;
}

// How long a held cut waits without progress below its barrier before it drains instead, and
// the timeout each ps's hold gets (renewed while the chief waits, so that it ends on its own
// only when the chief is gone).
constexpr absl::Duration kHoldPatience = absl::Seconds(2);
constexpr absl::Duration kHoldTimeout = absl::Seconds(10);

bool CheckpointDriver::HoldLocked(int64_t barrier) {
  const int64_t generation = s_->generation;
  s_->mu.Unlock();
  const absl::Status held = ps_->HoldPushesAll(generation, barrier, kHoldTimeout);
  s_->mu.Lock();
  if (held.ok()) return true;
  // A ps of an older build (UNIMPLEMENTED), or one that moved on: drain instead.
  LogWarning() << "checkpoint cut at step " << barrier
               << ": the ps could not hold later steps' pushes, draining instead: "
               << held.message();
  ReleaseHoldLocked();
  return false;
}

void CheckpointDriver::ReleaseHoldLocked() {
  const int64_t generation = s_->generation;
  s_->mu.Unlock();
  ps_->HoldPushesAll(generation, -1, kHoldTimeout).IgnoreError();
  s_->mu.Lock();
}

void CheckpointDriver::DrainLocked(Cut* at) {
  at->held = false;
  at->barrier = std::min(s_->scheduler->total_steps(),
                         s_->scheduler->RoundUp(s_->scheduler->NextNew()));
  s_->scheduler->SetBarrier(at->barrier);
  s_->SetPhaseLocked(Kind::kCheckpointCut,
                     absl::StrCat("finishing the steps below ", at->barrier));
}

absl::StatusOr<CheckpointDriver::Cut> CheckpointDriver::CutLocked(bool final, bool drain) {
  const int64_t total = s_->scheduler->total_steps();
  Cut at;
  at.barrier = final ? total : std::min(total, s_->scheduler->RoundUp(s_->scheduler->NextNew()));
  s_->scheduler->SetBarrier(at.barrier);
  s_->SetPhaseLocked(Kind::kCheckpointCut,
                     absl::StrCat("finishing the steps below ", at.barrier));
  // No step at or above the barrier has been leased: once every ps holds their pushes, they
  // may be. A final cut has none after it.
  drain |= s_->job.checkpoint().cut() == CheckpointSpec::DRAIN;
  if (!final && !drain && at.barrier < total && HoldLocked(at.barrier)) {
    at.held = true;
    s_->scheduler->ClearBarrier();
    s_->WakeDispatcherLocked();
  }
  RecoveryLockHeld();
  auto cut = [this, &at]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s_->mu) {
    RecoveryLockHeld();
    return s_->scheduler->DonePrefix() >= at.barrier || s_->stopping ||
           s_->status.state() != JobStatus::RUNNING || recovery_->pending() ||
           s_->phase.kind() == Kind::kPsUnreachable;
  };
  int64_t progress = s_->scheduler->DonePrefix();
  absl::Time progressed = absl::Now();
  absl::Time renewed = absl::Now();
  while (!cut()) {
    s_->mu.AwaitWithTimeout(absl::Condition(&cut), absl::Milliseconds(at.held ? 50 : 200));
    recovery_->UpdatePsPhaseLocked();
    if (!at.held || cut()) continue;
    const absl::Time now = absl::Now();
    if (s_->scheduler->DonePrefix() > progress) {
      progress = s_->scheduler->DonePrefix();
      progressed = now;
    }
    if (now - progressed > kHoldPatience) {
      // Everyone may be waiting on a held push while a step below the barrier waits for a
      // worker: let go, and drain to a new barrier past every step leased so far.
      LogWarning() << "checkpoint cut at step " << at.barrier << ": no step below it done in "
                   << absl::FormatDuration(kHoldPatience) << "; draining instead";
      ReleaseHoldLocked();
      DrainLocked(&at);
    } else if (now - renewed > kHoldTimeout / 4) {
      renewed = now;
      if (!HoldLocked(at.barrier)) DrainLocked(&at);  // it released every ps
    }
  }
  if (s_->scheduler->DonePrefix() >= at.barrier) return at;
  if (at.held) ReleaseHoldLocked();
  s_->scheduler->ClearBarrier();
  s_->ReleasePhaseLocked(Kind::kCheckpointCut);
  s_->WakeDispatcherLocked();
  return absl::AbortedError(absl::StrCat(
      "abandoned before the cut at step ", at.barrier, ": ",
      recovery_->pending()                          ? recovery_->cause()
      : s_->phase.kind() == Kind::kPsUnreachable ? s_->phase.Text()
                                                    : std::string("the job stopped")));
}

CheckpointDriver::Plan CheckpointDriver::PlanLocked(bool final, int64_t barrier) const {
  Plan plan;
  plan.dir = s_->store->dir();
  CheckpointContents& contents = plan.contents;
  contents.job = s_->job;
  const JobSpec& job = contents.job;
  contents.job_id = job.job_id();
  contents.generation = s_->generation;
  contents.final = final;
  contents.steps_done = barrier;
  contents.total_steps = s_->scheduler->total_steps();
  contents.steps_per_epoch = s_->status.steps_per_epoch();
  plan.keep = std::max(1, job.checkpoint().keep());
  if (job.checkpoint().keep_best() && s_->store_state.best_checkpoint > 0) {
    plan.best = s_->store_state.best_checkpoint;
  }
  // Dynamic tables are written incrementally, on top of the previous committed checkpoint
  // of this generation, until full_every - 1 increments have been taken.
  const int full_every =
      job.checkpoint().full_every() > 0 ? job.checkpoint().full_every() : kDefaultFullEvery;
  bool dynamic = false;
  for (const VariableDef& def : s_->defs) {
    dynamic |= def.dynamic.has_value();
    plan.variables.push_back(def.name);
  }
  plan.incremental_since =
      dynamic && incremental_base_ > 0 && increments_ + 1 < full_every ? incremental_base_ : 0;
  return plan;
}

}  // namespace shardps
