// What a snapshot's file holds for one shard, from the shard's cut (taken under its lock by
// ShardCheckpoints): the tensors for SnapshotWriter and the shard's ShardInfo in the answer.
// A dense shard's tensors are views of its copy-on-write blocks: "<shard>" and
// "<shard>/<slot>" for each optimizer slot, of the shard's shape. A dynamic shard's are its
// cut's copies: "<shard>/keys" (I64 [n]), "<shard>" (F32 [n, dim]), "<shard>/<slot>" for
// each slot, "<shard>/last_steps" (U32 [n]) and "<shard>/deleted_keys" (I64 [m]); its
// ShardInfo says which checkpoint it is an increment on (base_checkpoint; 0: every row).
//
// Thread-safety: functions. REQUIRES: the shard's lock not held.
#ifndef SHARDPS_PS_SERVER_SNAPSHOT_CUT_H_
#define SHARDPS_PS_SERVER_SNAPSHOT_CUT_H_

#include "proto/ps.pb.h"
#include "ps_server/shard.h"
#include "ps_server/snapshot_writer.h"

namespace shardps {

// Appends a dense shard's tensors to `job` (taking the snapshot's views and references) and
// fills `info`.
void AddDenseCut(const Shard& shard, Shard::Snapshot snapshot, SnapshotWriter::Job* job,
                 ShardInfo* info);

// Appends a dynamic shard's tensors to `job` (taking the cut's copies) and fills `info`.
void AddDynamicCut(const Shard& shard, Shard::DynamicCut cut, SnapshotWriter::Job* job,
                   ShardInfo* info);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SNAPSHOT_CUT_H_
