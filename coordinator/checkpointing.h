// The chief's side of a checkpoint: turning the ps tasks' snapshots into a committed
// checkpoint, on a schedule, and choosing what to restore after a failure.
//
// A checkpoint is taken at a barrier (coordinator/scheduler.h): once steps [0, b) are done
// and no later step has run, the chief asks every ps to snapshot (PsClient::SnapshotAll) and
// lifts the barrier as soon as they answer, so training stalls only for the cut; each ps then
// writes its file on its own. The chief waits for every file (SnapshotStatus), writes the
// manifest (checkpoint/manifest.h) and commits it (CheckpointDir::Commit), then prunes.
//
// Thread-safety: functions; they block on the ps and the disk, and the chief calls them on its
// control thread, holding no lock.
#ifndef SHARDPS_COORDINATOR_CHECKPOINTING_H_
#define SHARDPS_COORDINATOR_CHECKPOINTING_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/manifest.h"
#include "client/ps_client.h"
#include "proto/coordinator.pb.h"
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

// A cut taken: every ps has snapshotted as checkpoint `id` and writes its file under `path`.
struct CheckpointCut {
  int64_t id = 0;
  std::string path;
  std::vector<SnapshotResponse> snapshots;  // per ps task
};

// The next checkpoint of `dir`: its directory prepared and every ps snapshotted into it at
// `generation` (dynamic tables as increments on checkpoint `incremental_since`; 0: whole).
absl::StatusOr<CheckpointCut> SnapshotEveryPs(PsClient& ps, const CheckpointDir& dir,
                                              int64_t generation, int64_t incremental_since);

struct CommitOptions {
  int keep = 1;                       // committed checkpoints kept by pruning
  std::optional<int64_t> keep_also;   // and this one (keep_best)
  absl::Time started;                 // when the checkpoint began (its write_seconds)
  double pause_ms = 0;                // how long training stalled for the cut
  std::function<bool()> stopping;     // asked between looks at the files: true gives up
};

// Waits for every ps's file of `cut`, then writes and commits the manifest of `contents`
// (its id, snapshots and files taken from the cut, its variables' layouts from `ps`), and
// prunes `dir` (a failed prune is logged). INTERNAL naming a ps that could not write its
// file; ABORTED with PS_STATE_LOST naming a ps that no longer knows the checkpoint (it
// restarted); CANCELLED when `stopping`; the ps's and the disk's errors otherwise.
absl::StatusOr<CheckpointInfo> CommitCheckpoint(PsClient& ps, const CheckpointDir& dir,
                                                const CheckpointCut& cut,
                                                CheckpointContents contents,
                                                const std::vector<std::string>& variables,
                                                const CommitOptions& options);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHECKPOINTING_H_
