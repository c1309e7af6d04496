// The chief's side of a checkpoint: turning the ps tasks' snapshots into a committed
// checkpoint, and choosing what to restore after a failure.
//
// A checkpoint is taken at a barrier (coordinator/scheduler.h): once steps [0, b) are done
// and no later step has run, the chief asks every ps to snapshot (PsClient::SnapshotAll) and
// lifts the barrier as soon as they answer, so training stalls only for the cut; each ps then
// writes its file on its own. The chief waits for every file (SnapshotStatus), writes the
// manifest (checkpoint/manifest.h) and commits it (CheckpointDir::Commit), then prunes.
//
// Thread-safety: functions; the chief calls them on its control thread, holding no lock.
#ifndef SHARDPS_COORDINATOR_CHECKPOINTING_H_
#define SHARDPS_COORDINATOR_CHECKPOINTING_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "checkpoint/manifest.h"
#include "client/ps_client.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"

namespace shardps {

// Everything a manifest records, gathered by the chief.
struct CheckpointContents {
  int64_t checkpoint_id = 0;
  std::string job_id;
  JobSpec job;
  int64_t generation = 0;
  bool final = false;
  int64_t steps_done = 0;  // the cut: steps [0, steps_done) are in, none after
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 0;
  std::vector<VariableLayout> variables;    // every variable of the job, as placed
  std::vector<SnapshotResponse> snapshots;  // per ps task: the shards' versions at the cut
  std::vector<DataFileInfo> files;          // per ps task: the file it wrote
  std::optional<ManifestEval> eval;
};

// The manifest for `contents`. INTERNAL naming the shard when a shard of a variable is not
// in its ps's snapshot or its tensors are not in that ps's file (a ps that lost a shard
// between layout and snapshot): such a checkpoint must not be committed.
absl::StatusOr<Manifest> BuildManifest(const CheckpointContents& contents, double unix_time);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHECKPOINTING_H_
