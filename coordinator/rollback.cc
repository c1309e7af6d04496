#include "coordinator/rollback.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "client/bucket_mover.h"
#include "client/variable_layout.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"

namespace shardps {

absl::Status CreateJobVariables(PsClient& ps, const JobSpec& job,
                                const std::vector<VariableDef>& defs, bool* recreated,
                                int dense_ps) {
  if (recreated != nullptr) *recreated = false;
  const int dense_n = dense_ps > 0 ? std::min(dense_ps, ps.num_ps()) : ps.num_ps();
  ASSIGN_OR_RETURN(auto partitioner, ParsePartitioner(job.partitioner(), dense_n));
  ASSIGN_OR_RETURN(auto placer, ParsePlacement(job.placement(), dense_n));
  absl::Status s = ps.CreateVariables(defs, *partitioner, placer.get());
  if (s.ok()) {
    const std::vector<std::string> tables = DynamicTableNames(defs);
    if (tables.empty()) return s;
    // A move this chief's predecessor was cut off in: finished where the source had handed
    // the buckets over, else aborted (client/bucket_mover.h).
    // One that cannot be finished leaves the tables torn, and Discover says so below.
    absl::StatusOr<CutOffMoves> cut_off = FinishCutOffMoves(&ps, tables);
    if (!cut_off.ok()) {
      LogWarning() << "job " << job.name() << ": " << cut_off.status();
    } else {
      for (const std::string& line : cut_off->what) {
        LogInfo() << "job " << job.name() << ": a bucket move was cut off: " << line;
      }
    }
    // The ranges the tables' shards hold now, which bucket moves may have shifted from the
    // placement just asked for (an existing shard keeps its own).
    s = ps.Discover();
    if (s.code() != absl::StatusCode::kFailedPrecondition) return s;
    LogWarning() << "job " << job.name()
                 << "'s dynamic tables are not whole on the ps (a ps restarted after a bucket "
                    "move, or a move was cut off); dropping the job's shards ("
                 << s.message() << ")";
  } else if (s.code() != absl::StatusCode::kAlreadyExists) {
    return s;
  } else {
    LogInfo() << "the ps hold job " << job.name()
              << "'s variables in another layout; dropping them (" << s.message() << ")";
  }
  if (recreated != nullptr) *recreated = true;
  DropShardsRequest drop;
  for (const VariableDef& def : defs) drop.add_variables(def.name);
  RETURN_IF_ERROR(ps.DropShardsAll(drop));
  ASSIGN_OR_RETURN(placer, ParsePlacement(job.placement(), dense_n));
  return ps.CreateVariables(defs, *partitioner, placer.get());
}

absl::StatusOr<RollbackOutcome> RollBack(PsClient& ps, const JobSpec& job,
                                         const std::vector<VariableDef>& defs,
                                         const JobStore* store, int64_t generation,
                                         int dense_ps) {
  RETURN_IF_ERROR(CreateJobVariables(ps, job, defs, nullptr, dense_ps));
  RollbackOutcome out;
  RestoreRequest request;
  request.set_generation(generation);
  // Only this job's variables: a long-lived ps may hold other jobs' too.
  for (const VariableDef& def : defs) (*request.mutable_variable_map())[def.name] = def.name;
  std::vector<RestoreResponse> responses;
  if (store != nullptr) {
    std::vector<std::string> unreadable;
    ASSIGN_OR_RETURN(std::vector<CommittedCheckpoint> checkpoints,
                     store->dir().List(&unreadable));
    for (const std::string& u : unreadable) out.skipped.push_back(u);
    for (const CommittedCheckpoint& c : checkpoints) {
      if (c.manifest.job_id != job.job_id()) {
        out.skipped.push_back(absl::StrCat("checkpoint ", c.id, " belongs to job ",
                                           c.manifest.job_id));
        continue;
      }
      request.set_manifest(c.manifest_path);
      absl::Status s = ps.RestoreAll(request, &responses);
      if (s.ok()) {
        out.checkpoint_id = c.id;
        out.steps_done = c.manifest.progress.steps_done;
        return out;
      }
      const absl::StatusCode code = s.code();
      if (code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kFailedPrecondition ||
          code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound) {
        LogWarning() << "checkpoint " << c.id << " cannot be restored: " << s;
        out.skipped.push_back(absl::StrCat("checkpoint ", c.id, ": ", s.message()));
        continue;
      }
      return s;
    }
  }
  request.clear_manifest();
  RETURN_IF_ERROR(ps.RestoreAll(request, &responses));
  return out;
}

}  // namespace shardps
