// Putting the ps tasks into a job's layout and state: creating the job's variables (dropping
// them first where the ps hold them in another layout: a re-sharded restore follows), and
// rolling every ps back to the newest checkpoint of the job that restores, in a new
// generation. Used when a job starts (job_preparation.h) and after a ps lost its state
// (recovery.h).
//
// Thread-safety: functions; they block on the ps, and the chief calls them holding no lock.
#ifndef SHARDPS_COORDINATOR_ROLLBACK_H_
#define SHARDPS_COORDINATOR_ROLLBACK_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "coordinator/job_store.h"
#include "proto/job.pb.h"

namespace shardps {

// Creates the job's variables on every ps (idempotent where they exist with the same
// layout). Shards of this job in another layout (another partitioner or number of ps) are
// dropped first. A job with dynamic tables then takes their live layout from the ps (bucket
// moves shift their shards' ranges, docs/elastic.md); when the shards of a table do not tile
// its buckets (a ps that restarted after a move came back with its first range, or a move
// cut off between its source's drop and its target's activation), every shard of the job is
// dropped and created again. `*recreated` (when given) says whether the job's shards were
// dropped: their state is gone, and only a restore brings it back.
// `dense_ps` (0: every ps of `ps`): the dense variables are partitioned and placed over the
// first dense_ps ps only (a ps added live holds only dynamic tables: JobStore::State).
absl::Status CreateJobVariables(PsClient& ps, const JobSpec& job,
                                const std::vector<VariableDef>& defs, bool* recreated = nullptr,
                                int dense_ps = 0);

// The outcome of rolling every ps back.
struct RollbackOutcome {
  int64_t checkpoint_id = 0;  // 0: re-initialized (no usable checkpoint)
  int64_t steps_done = 0;
  std::vector<std::string> skipped;  // checkpoints that could not be used, and why
};

// Rolls every ps back to the newest checkpoint of `store` that restores (a corrupt or
// unusable one, or one of another job, is skipped, named), or re-initializes the job's
// shards when there is none (or no store); the ps move to `generation` first. Creates the
// job's shards where they are missing (a restarted ps). Other errors are the ps's (say, one
// down again): the caller retries.
absl::StatusOr<RollbackOutcome> RollBack(PsClient& ps, const JobSpec& job,
                                         const std::vector<VariableDef>& defs,
                                         const JobStore* store, int64_t generation,
                                         int dense_ps = 0);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_ROLLBACK_H_
