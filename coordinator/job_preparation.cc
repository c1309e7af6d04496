#include "coordinator/job_preparation.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/manifest.h"
#include "common/error_detail.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/job_spec.h"
#include "coordinator/rollback.h"
#include "data/dataset.h"
#include "model/external/external_model.h"

namespace shardps {
namespace {

// How the job's state was found when it started.
struct StartOutcome {
  int64_t generation = 0;
  int64_t base_steps = 0;              // steps [0, base_steps) done at the start of generation
  std::vector<int64_t> journal_steps;  // and these, done since (a live resume)
  int64_t total_steps = 0;
  std::string resumed_from;            // "" for a fresh start
  std::vector<uint64_t> incarnations;  // of every ps, as the job starts
};

// Sync mode's k: the gradients of a sync step that the ps apply it with (k = n - b with b
// backup workers); 0 without backups, so that the shards' specs are those of a job from
// before backup workers existed (a live resume compares them).
int ReplicasToAggregate(const JobSpec& job) {
  if (job.mode() != JobSpec::SYNC || job.sync_backup_workers() <= 0) return 0;
  return job.num_replicas() - job.sync_backup_workers();
}

// The job's step queue and variables, sized from its dataset's description (its files'
// headers, not its examples), which also rejects a job whose data is missing before any
// worker starts.
absl::Status PlanJob(const JobSpec& job, PreparedJob* out) {
  // An external model's data is with the user's code: the job file says how much there is.
  absl::StatusOr<DatasetInfo> train =
      job.model() == kExternalModel
          ? ExternalDatasetInfo(job)
          : DescribeDataset(job.dataset(), job.data_dir(), Split::kTrain);
  if (!train.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job: \"data_dir\": cannot load ", job.dataset(), " from \"", job.data_dir(),
        "\": ", train.status().message()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(job, *train));
  Scheduler::Plan plan;
  plan.steps_per_epoch = StepsPerEpoch(train->num_examples, job.batch_size());
  plan.total_steps = job.steps() > 0 ? job.steps() : plan.steps_per_epoch * job.epochs();
  switch (job.mode()) {
    case JobSpec::ASYNC:
      plan.mode = Scheduler::Mode::kAsync;
      break;
    case JobSpec::SYNC:
      plan.mode = Scheduler::Mode::kSync;
      plan.num_replicas = job.num_replicas();
      plan.replicas_to_aggregate = ReplicasToAggregate(job);
      break;
    case JobSpec::STALE:
      plan.mode = Scheduler::Mode::kStale;
      plan.staleness = job.staleness();
      break;
    default:
      return absl::InvalidArgumentError("job: \"mode\": unsupported");
  }
  ASSIGN_OR_RETURN(Scheduler scheduler, Scheduler::Create(plan));
  out->steps_per_epoch = plan.steps_per_epoch;
  out->scheduler = std::make_unique<Scheduler>(std::move(scheduler));
  out->defs = JobVariables(job, *model);
  return absl::OkStatus();
}

// The checkpoint directory. One that cannot be used is reported (checkpoint_error), and the
// job trains on without durable state.
absl::Status OpenStore(const JobSpec& job, SubmitJobRequest::Resume resume, PreparedJob* out) {
  if (job.has_checkpoint() && job.checkpoint().dir().empty()) {
    out->checkpoint_error =
        "the job file schedules checkpoints but names no \"checkpoint.dir\", and the chief "
        "has no --checkpoint_dir: the job has no durable state";
    LogWarning() << out->checkpoint_error;
  }
  if (!job.checkpoint().dir().empty()) {
    absl::StatusOr<std::unique_ptr<JobStore>> opened = JobStore::Open(job.checkpoint().dir());
    if (opened.ok()) {
      out->store = *std::move(opened);
    } else {
      out->checkpoint_error = std::string(opened.status().message());
      LogWarning() << "checkpoints disabled: " << out->checkpoint_error;
    }
  }
  if (out->store == nullptr && resume == SubmitJobRequest::RESUME) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", job.name(), "\": nothing to resume: ",
        job.checkpoint().dir().empty() ? "the job has no checkpoint directory"
                                       : out->checkpoint_error));
  }
  if (out->store != nullptr && resume == SubmitJobRequest::FRESH) {
    LogInfo() << "--fresh: removing the checkpoints and journal in "
              << out->store->dir().path();
    RETURN_IF_ERROR(out->store->dir().Clear());
  }
  return absl::OkStatus();
}

// The job's id and recorded state: the directory's when it knows the job (*known), else a
// new id and no state.
absl::Status IdentifyJob(SubmitJobRequest::Resume resume, PreparedJob* out, bool* known) {
  std::optional<JobStore::Identity> identity;
  if (out->store != nullptr) {
    ASSIGN_OR_RETURN(identity, out->store->ReadIdentity());
    ASSIGN_OR_RETURN(out->state, out->store->ReadState());
  }
  *known = identity.has_value();
  if (identity.has_value()) {
    RETURN_IF_ERROR(CheckSameJob(identity->job, out->job));
    out->job.set_job_id(identity->job_id);
    return absl::OkStatus();
  }
  if (resume == SubmitJobRequest::RESUME) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", out->job.name(), "\": nothing to resume in ", out->store->dir().path()));
  }
  absl::BitGen gen;
  out->job.set_job_id(absl::StrCat(out->job.name(), "-",
                                   absl::Hex(absl::Uniform<uint32_t>(gen), absl::kZeroPad8)));
  out->state = JobStore::State();
  return absl::OkStatus();
}

// Every ps answering, with its health. UNAVAILABLE naming the first that does not, after
// retrying for ps_unreachable_after: a ps that has just come up (the chief waited for it)
// may still be refused for a moment by a connection of ours that is backing off from
// before it was up, and a probe is not retried.
absl::StatusOr<std::vector<HealthResponse>> HealthOfAll(const PrepareOptions& options) {
  const absl::Time deadline = absl::Now() + options.ps_unreachable_after;
  while (true) {
    std::vector<absl::Status> statuses;
    std::vector<HealthResponse> responses;
    options.ps->HealthEach(/*from_chief=*/true, absl::Seconds(5), &statuses, &responses);
    absl::Status failed;
    for (const absl::Status& s : statuses) {
      if (!s.ok()) {
        failed = s;
        break;
      }
    }
    if (failed.ok()) return responses;
    if (failed.code() != absl::StatusCode::kUnavailable || absl::Now() >= deadline) {
      return failed;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// `path`: a checkpoint directory (its newest committed checkpoint) or one checkpoint.
absl::StatusOr<CommittedCheckpoint> FindCheckpoint(const std::string& path) {
  absl::StatusOr<std::string> own = ReadWholeFile(path + "/manifest.json");
  if (own.ok()) {
    CommittedCheckpoint c;
    c.path = path;
    c.manifest_path = path + "/manifest.json";
    ASSIGN_OR_RETURN(c.manifest, ParseManifest(*own, c.manifest_path));
    c.id = c.manifest.checkpoint_id;
    return c;
  }
  ASSIGN_OR_RETURN(CheckpointDir dir, CheckpointDir::Open(path, /*create=*/false));
  ASSIGN_OR_RETURN(std::vector<CommittedCheckpoint> all, dir.List());
  if (all.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("\"", path, "\" holds no committed checkpoint"));
  }
  return all.front();
}

absl::Status WarmStart(PsClient& ps, const JobSpec& job, const std::vector<VariableDef>& defs,
                       int64_t generation) {
  RestoreRequest request;
  request.set_generation(generation);
  request.set_params_only(!job.warm_start().with_slots());
  ASSIGN_OR_RETURN(CommittedCheckpoint source, FindCheckpoint(job.warm_start().from()));
  request.set_manifest(source.manifest_path);
  if (job.warm_start().variables().empty()) {
    for (const VariableDef& def : defs) {
      if (source.manifest.FindVariable(def.name) != nullptr) {
        (*request.mutable_variable_map())[def.name] = def.name;
      }
    }
  } else {
    for (const auto& [mine, theirs] : job.warm_start().variables()) {
      (*request.mutable_variable_map())[mine] = theirs;
    }
  }
  if (request.variable_map().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job: \"warm_start.from\": checkpoint ", source.path,
        " holds none of this job's variables; name them in \"warm_start.variables\""));
  }
  std::vector<RestoreResponse> responses;
  absl::Status s = ps.RestoreAll(request, &responses);
  if (!s.ok()) return Annotate(s, absl::StrCat("warm start from ", source.path));
  LogInfo() << "warm-started " << request.variable_map().size()
            << " variables from " << source.path;
  return absl::OkStatus();
}

// A job the directory knows, whose ps did not all keep this generation: rolled back to its
// newest usable checkpoint (or re-initialized) in generation out->generation.
absl::Status ResumeFromCheckpoint(const PrepareOptions& options, const PreparedJob& job,
                                  SubmitJobRequest::Resume resume, StartOutcome* out) {
  ASSIGN_OR_RETURN(RollbackOutcome rolled,
                   RollBack(*options.ps, job.job, job.defs, job.store.get(), out->generation,
                            job.dense_ps));
  if (rolled.checkpoint_id > 0) {
    out->base_steps = rolled.steps_done;
    out->resumed_from =
        absl::StrCat("checkpoint ", rolled.checkpoint_id, " (step ", rolled.steps_done, ")");
    if (!rolled.skipped.empty()) {
      absl::StrAppend(&out->resumed_from, "; skipped ", absl::StrJoin(rolled.skipped, "; "));
    }
    return absl::OkStatus();
  }
  const std::string skipped = absl::StrJoin(rolled.skipped, "; ");
  if (resume == SubmitJobRequest::RESUME) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job \"", job.job.job_id(), "\": nothing to resume: no usable checkpoint in ",
        job.store->dir().path(), skipped.empty() ? "" : absl::StrCat(" (", skipped, ")")));
  }
  if (!skipped.empty()) {
    out->resumed_from = absl::StrCat("step 0: no usable checkpoint (", skipped, ")");
  }
  return absl::OkStatus();  // RollBack re-initialized the shards
}

// A fresh start in generation out->generation. Shards the ps already held (a chief restarted
// without a checkpoint directory, --fresh) start over from their initializers.
absl::Status StartFresh(const PrepareOptions& options, const PreparedJob& job,
                        bool ps_hold_shards, const StartOutcome& out) {
  if (ps_hold_shards) {
    RestoreRequest reinit;
    reinit.set_generation(out.generation);
    for (const VariableDef& def : job.defs) {
      (*reinit.mutable_variable_map())[def.name] = def.name;
    }
    std::vector<RestoreResponse> responses;
    RETURN_IF_ERROR(options.ps->RestoreAll(reinit, &responses));
  } else {
    RETURN_IF_ERROR(options.ps->SetGenerationAll(out.generation));
  }
  if (!job.job.warm_start().from().empty()) {
    RETURN_IF_ERROR(WarmStart(*options.ps, job.job, job.defs, out.generation));
  }
  return absl::OkStatus();
}

// Decides how the job starts and puts the ps in that state: resumes from the ps's live state
// (every ps still at the generation the directory records, holding the job's shards), rolls
// back to the newest usable checkpoint, or starts fresh (warm-started when the job says so).
absl::StatusOr<StartOutcome> PrepareState(const PrepareOptions& options, const PreparedJob& job,
                                          bool known_job, SubmitJobRequest::Resume resume) {
  const JobStore::State& state = job.state;
  StartOutcome out;
  out.total_steps = state.total_steps > 0 ? state.total_steps : job.scheduler->total_steps();
  ASSIGN_OR_RETURN(std::vector<HealthResponse> before, HealthOfAll(options));
  bool ps_hold_shards = false;
  bool all_at_generation = state.generation > 0;
  int64_t max_generation = state.generation;
  for (const HealthResponse& h : before) {
    ps_hold_shards |= h.num_shards() > 0;
    all_at_generation &= h.generation() == state.generation;
    max_generation = std::max(max_generation, h.generation());
  }
  if (!ps_hold_shards) RETURN_IF_ERROR(CheckModelFits(job.defs, before));
  bool recreated = false;
  RETURN_IF_ERROR(
      CreateJobVariables(*options.ps, job.job, job.defs, &recreated, job.dense_ps));
  // Shards dropped and made again hold nothing of the job: no live state to resume.
  if (recreated) all_at_generation = false;
  ASSIGN_OR_RETURN(std::vector<HealthResponse> after, HealthOfAll(options));
  for (const HealthResponse& h : after) out.incarnations.push_back(h.incarnation());
  // A ps that restarted between the two probes lost what it had: treat it as such.
  for (size_t k = 0; k < before.size() && k < after.size(); ++k) {
    all_at_generation &= before[k].incarnation() == after[k].incarnation() &&
                         after[k].generation() == state.generation;
  }
  const bool may_resume =
      job.store != nullptr && known_job && resume != SubmitJobRequest::FRESH;

  if (may_resume && all_at_generation) {
    // Every ps kept its state since this generation began: resume without a rollback. The
    // journal names the steps done since; steps whose completion it missed run again
    // with the same request ids, which the ps answer as duplicates.
    out.generation = state.generation;
    out.base_steps = state.generation_start_steps;
    ASSIGN_OR_RETURN(out.journal_steps, job.store->JournalSteps(state.generation));
    out.resumed_from = absl::StrCat("the ps tasks' live state (generation ", out.generation,
                                    ", ", out.journal_steps.size(),
                                    " steps journalled since step ", out.base_steps, ")");
    return out;
  }
  out.generation = max_generation + 1;
  if (job.store != nullptr) {
    // Recorded before the ps move to it: a chief that dies now finds a generation no ps
    // is at, and rolls back again.
    JobStore::State moving = state;
    moving.generation = out.generation;
    RETURN_IF_ERROR(job.store->WriteState(moving));
  }
  if (may_resume) {
    RETURN_IF_ERROR(ResumeFromCheckpoint(options, job, resume, &out));
  } else {
    RETURN_IF_ERROR(StartFresh(options, job, ps_hold_shards, out));
  }
  return out;
}

// The ps the job runs on. A job a scale-ps moved (layout version > 1) stays on its journal's
// layout when TF_CONFIG still lists every ps of it (a restarted chief whose TF_CONFIG was not
// updated); a TF_CONFIG that lists none of them is another cluster, onto which the job is
// re-sharded from its newest checkpoint, as an unscaled job is; one that lists some but not
// all lacks a ps of the layout: FAILED_PRECONDITION naming it. Otherwise (a fresh start, or a
// job never scaled) the first JobSpec.num_ps of TF_CONFIG's (0: all).
absl::StatusOr<std::vector<std::string>> ChooseLayout(const PreparedJob& job, bool known_job,
                                                      SubmitJobRequest::Resume resume,
                                                      const PrepareOptions& options) {
  const std::vector<std::string>& cluster =
      options.cluster_ps.empty() ? options.current_ps : options.cluster_ps;
  const JobStore::State& state = job.state;
  if (known_job && resume != SubmitJobRequest::FRESH && state.layout_version > 1 &&
      !state.ps_addresses.empty()) {
    std::vector<std::string> missing;
    for (const std::string& a : state.ps_addresses) {
      if (std::find(cluster.begin(), cluster.end(), a) == cluster.end()) missing.push_back(a);
    }
    if (missing.empty()) return state.ps_addresses;
    if (missing.size() < state.ps_addresses.size()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job \"", job.job.job_id(), "\": its journal (layout version ",
          state.layout_version, ", after a scale-ps) places its shards on ps [",
          absl::StrJoin(state.ps_addresses, ", "), "], but the chief's TF_CONFIG ps job [",
          absl::StrJoin(cluster, ", "), "] lacks \"", missing[0],
          "\": give the chief a TF_CONFIG that lists every ps of the layout "
          "(docs/elastic.md)"));
    }
    LogInfo() << "job " << job.job.job_id() << ": none of its journal's ps ["
              << absl::StrJoin(state.ps_addresses, ", ")
              << "] is in TF_CONFIG: another cluster; the job is re-sharded onto TF_CONFIG's";
  }
  const int n = job.job.num_ps();
  if (n == 0) return cluster;
  if (n > static_cast<int>(cluster.size())) {
    return absl::InvalidArgumentError(absl::StrCat("job: \"num_ps\": ", n,
                                                   ", but the chief's TF_CONFIG names ",
                                                   cluster.size(), " ps"));
  }
  return std::vector<std::string>(cluster.begin(), cluster.begin() + n);
}

// Records the start in the job's directory: its identity (a new job), its state, and the
// journal of its generation.
absl::Status RecordStart(bool known_job, const StartOutcome& outcome, PreparedJob* out) {
  if (out->store == nullptr) return absl::OkStatus();
  if (!known_job) {
    JobStore::Identity fresh{out->job.job_id(), out->job};
    RETURN_IF_ERROR(out->store->WriteIdentity(fresh));
  }
  out->state.generation = outcome.generation;
  out->state.generation_start_steps = outcome.base_steps;
  out->state.total_steps = outcome.total_steps;
  out->state.ps_addresses = out->ps_addresses;
  out->state.layout_version = out->layout_version;
  out->state.dense_ps = out->dense_ps;
  RETURN_IF_ERROR(out->store->WriteState(out->state));
  return out->store->StartJournal(outcome.generation);
}

}  // namespace

absl::StatusOr<PreparedJob> PrepareJob(JobSpec job, SubmitJobRequest::Resume resume,
                                       const PrepareOptions& options) {
  PreparedJob out;
  out.job = std::move(job);
  RETURN_IF_ERROR(PlanJob(out.job, &out));
  RETURN_IF_ERROR(OpenStore(out.job, resume, &out));
  bool known_job = false;
  RETURN_IF_ERROR(IdentifyJob(resume, &out, &known_job));

  out.response.set_job_id(out.job.job_id());
  if (out.state.finished) {
    out.scheduler.reset();
    out.response.set_already_finished(true);
    out.response.set_total_steps(out.state.total_steps);
    out.response.set_resumed_at_step(out.state.total_steps);
    out.response.set_resumed_from(
        absl::StrCat("finished before (checkpoint ", out.state.final_checkpoint, ")"));
    return out;
  }

  ASSIGN_OR_RETURN(out.ps_addresses, ChooseLayout(out, known_job, resume, options));
  if (out.ps_addresses != options.current_ps) {
    if (!options.use_ps) {
      return absl::FailedPreconditionError(absl::StrCat(
          "job \"", out.job.job_id(), "\" runs on ps [", absl::StrJoin(out.ps_addresses, ", "),
          "]; this chief reaches only [", absl::StrJoin(options.current_ps, ", "), "]"));
    }
    RETURN_IF_ERROR(options.use_ps(out.ps_addresses));
    LogInfo() << "job " << out.job.job_id() << " runs on " << out.ps_addresses.size()
              << " ps [" << absl::StrJoin(out.ps_addresses, ", ") << "]";
  }
  const bool resumes_layout = known_job && resume != SubmitJobRequest::FRESH;
  out.layout_version = resumes_layout ? std::max<int64_t>(1, out.state.layout_version) : 1;
  // Re-sharded onto other ps than the journal's (another cluster, another num_ps): a new
  // layout.
  if (resumes_layout && !out.state.ps_addresses.empty() &&
      out.ps_addresses != out.state.ps_addresses) {
    ++out.layout_version;
  }
  // The journal's layout followed: its dense variables stay on the ps they are on.
  if (resumes_layout && out.ps_addresses == out.state.ps_addresses) {
    out.dense_ps = static_cast<int>(out.state.dense_ps);
  }
  ASSIGN_OR_RETURN(StartOutcome outcome, PrepareState(options, out, known_job, resume));
  Scheduler& scheduler = *out.scheduler;
  RETURN_IF_ERROR(
      scheduler.Restore(outcome.base_steps, outcome.journal_steps, outcome.total_steps));
  RETURN_IF_ERROR(RecordStart(known_job, outcome, &out));
  out.generation = outcome.generation;
  out.incarnations = outcome.incarnations;
  out.response.set_total_steps(scheduler.total_steps());
  out.response.set_resumed_at_step(scheduler.done_steps());
  out.response.set_resumed_from(outcome.resumed_from);
  if (!outcome.resumed_from.empty()) {
    LogInfo() << "job " << out.job.job_id() << " resumed from " << outcome.resumed_from
              << " at step " << scheduler.done_steps() << " of " << scheduler.total_steps()
              << " (generation " << outcome.generation << ")";
  }
  return out;
}

std::vector<VariableDef> JobVariables(const JobSpec& job, const Model& model) {
  std::vector<VariableDef> defs;
  for (const VariableInfo& var : model.variables()) {
    VariableDef def;
    def.name = absl::StrCat(job.name(), "/", var.name);
    def.shape = var.shape;
    def.initializer = var.initializer;
    def.optimizer = var.access == VariableAccess::kRows && job.has_embedding_optimizer()
                        ? job.embedding_optimizer()
                        : job.optimizer();
    if (var.dynamic) {
      const DynamicTablesSpec& tables = job.dynamic_tables();
      def.dynamic = DynamicTableDef{};
      if (tables.num_buckets() > 0) def.dynamic->num_buckets = tables.num_buckets();
      def.dynamic->admit_after = tables.admit_after();
      def.dynamic->ttl_steps = tables.ttl_steps();
      def.dynamic->max_rows = tables.max_rows();
    }
    if (job.mode() == JobSpec::SYNC) {
      def.update.set_mode(UpdateSpec::SYNC);
      def.update.set_num_replicas(job.num_replicas());
      def.update.set_replicas_to_aggregate(ReplicasToAggregate(job));
    } else if (!var.dynamic) {
      // The ps' staleness-aware updates (ps_server/staleness.h); retained_versions stays
      // the ps' default, so the shards' specs do not depend on the cluster's size. (A
      // dynamic table has none: its rows are applied as pushed.)
      def.update.set_staleness_lr(job.staleness_lr());
      def.update.set_delay_compensation(job.delay_compensation());
      def.update.set_delay_compensation_adaptive(job.delay_compensation_adaptive());
    }
    defs.push_back(def);
  }
  return defs;
}

int64_t JobBytes(const std::vector<VariableDef>& defs) {
  int64_t need = 0;
  for (const VariableDef& def : defs) {
    int64_t elements = 1;
    for (int64_t d : def.shape) elements *= d;
    // A dynamic table grows as rows are pushed: count its budget when it has one.
    if (def.dynamic.has_value()) elements = def.dynamic->max_rows * def.shape.back();
    int slots = 0;
    switch (def.optimizer.type()) {
      case OptimizerSpec::MOMENTUM:
      case OptimizerSpec::ADAGRAD:
        slots = 1;
        break;
      case OptimizerSpec::ADAM:
      case OptimizerSpec::FTRL:
        slots = 2;
        break;
      default:
        break;
    }
    need += elements * static_cast<int64_t>(sizeof(float)) * (1 + slots);
  }
  return need;
}

absl::Status CheckModelFits(const std::vector<VariableDef>& defs,
                            const std::vector<HealthResponse>& health) {
  const int64_t need = JobBytes(defs);
  int64_t available = 0;
  for (const HealthResponse& h : health) {
    if (h.memory_budget_bytes() <= 0) return absl::OkStatus();  // a ps without a budget
    available += h.memory_available_bytes();
  }
  if (need > available) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job: \"model\": the model needs ", need, " bytes of parameters and optimizer slots; "
        "the ", health.size(), " ps tasks can hold ", available,
        " more (their --memory_budget_bytes less the snapshot reserve)"));
  }
  return absl::OkStatus();
}

}  // namespace shardps
