// ShardCheckpoints: the store's durable state (ShardStore::Snapshot, SnapshotStatus,
// Restore). A snapshot cuts every shard by reference under its lock and hands the file to a
// SnapshotWriter thread; a restore raises the generation, checks every shard against the
// checkpoint, then replaces shard by shard. One restore at a time; a snapshot is refused
// while one runs (it would cut a half-restored ps). ShardStore documents each call's
// contract.
//
// Thread-safety: thread-safe. Restore blocks while it reads (call it off serving threads).
#ifndef SHARDPS_PS_SERVER_SHARD_CHECKPOINTS_H_
#define SHARDPS_PS_SERVER_SHARD_CHECKPOINTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint_reader.h"
#include "common/data_root.h"
#include "proto/ps.pb.h"
#include "ps_server/generation_fence.h"
#include "ps_server/pull_waits.h"
#include "ps_server/shard.h"
#include "ps_server/shard_map.h"
#include "ps_server/shard_restore.h"
#include "ps_server/snapshot_writer.h"

namespace shardps {

class ShardCheckpoints {
 public:
  // Snapshots' metadata name ps task `task_index`. Every pointer must outlive this.
  // `data_root`: where snapshots may be written and checkpoints read from (common/data_root.h).
  ShardCheckpoints(int task_index, const ShardMap* shards, GenerationFence* fence, PullWaits* waits,
                   SnapshotWriter::Options writer_options, DataRoot data_root = DataRoot())
      : task_index_(task_index),
        shards_(shards),
        fence_(fence),
        waits_(waits),
        writer_(std::move(writer_options)),
        data_root_(std::move(data_root)) {}

  absl::Status Snapshot(const SnapshotRequest& request, SnapshotResponse* response);
  absl::Status SnapshotStatus(const SnapshotStatusRequest& request,
                              SnapshotStatusResponse* response);
  absl::Status Restore(const RestoreRequest& request, RestoreResponse* response);

 private:
  using RestorePlan = std::vector<std::pair<std::shared_ptr<Shard>, ShardSource>>;

  absl::Status SnapshotChecked(const SnapshotRequest& request, SnapshotResponse* response);
  // Takes the snapshot's references under each shard's lock and queues the file.
  // `path`: the request's, resolved under the data root.
  absl::Status TakeCut(const SnapshotRequest& request, const std::string& path,
                       const std::string& what,
                       SnapshotResponse* response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(restore_mu_);

  absl::Status RestoreChecked(const RestoreRequest& request, RestoreResponse* response);
  // The shards a restore replaces, and where each comes from (a warm start's variable_map
  // skips those it does not name); with a manifest, *reader opens it and each shard is
  // checked against the checkpoint.
  absl::StatusOr<RestorePlan> PlanRestore(const RestoreRequest& request,
                                          std::unique_ptr<CheckpointReader>* reader) const;
  // A dense shard's restore: its state read whole into fresh blocks (its initial state
  // without a reader), swapped in under its lock.
  absl::Status RestoreDense(CheckpointReader* reader, const std::shared_ptr<Shard>& shard,
                            const ShardSource& source, RestoreResponse* response,
                            int64_t* bytes_read);
  // A dynamic shard's restore: a fresh table of its options, filled from the checkpoint's
  // chain (checkpoint/dynamic_rows.h) with the keys of its buckets, or left empty (the
  // initial state) without a reader; swapped in under the shard's lock.
  absl::Status RestoreDynamic(CheckpointReader* reader, const std::shared_ptr<Shard>& shard,
                              const ShardSource& source, RestoreResponse* response,
                              int64_t* bytes_read);

  const int task_index_;
  const ShardMap* const shards_;
  GenerationFence* const fence_;
  PullWaits* const waits_;
  absl::Mutex restore_mu_;  // held by a Restore throughout
  // Writes snapshots' files; holds only references to blocks, never to shards.
  SnapshotWriter writer_;
  const DataRoot data_root_;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_CHECKPOINTS_H_
