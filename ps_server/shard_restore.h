// Reading one shard's state from a committed checkpoint, for ShardStore::Restore: by rows,
// not by files. The manifest records each checkpoint shard's global row range, so the shard
// reads its own rows [row_offset, row_offset + rows) of its variable from whichever
// checkpoint shards hold them (CheckpointReader): a checkpoint written by M ps under one
// partitioner restores bit-identically into N ps under another.
//
// The bytes go from the file straight into the new blocks, and a shard's tensors are read
// at once on a few threads (a restore is bound by the kernel's copy and page faults, and,
// with a cold cache, by the disk).
//
// Every source tensor is checked against its checksum before its bytes count (a failure is
// DATA_LOSS with ErrorDetail CHECKPOINT_CORRUPT naming the file), and the state is built in
// fresh blocks: the shard itself is only replaced, under its lock, once all of it was read.
//
// Thread-safety: functions; the Shard's const accessors only (no lock needed).
#ifndef SHARDPS_PS_SERVER_SHARD_RESTORE_H_
#define SHARDPS_PS_SERVER_SHARD_RESTORE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/manifest.h"
#include "ps_server/shard.h"

namespace shardps {

// What to read for one shard.
struct ShardSource {
  std::string variable;      // the checkpoint's variable (a warm start may rename)
  bool params_only = false;  // slots start at their initial values, the version at 0
};

// Checks that `source` can fill `shard`: the variable is in the checkpoint with the shard's
// full shape and, unless params_only, every slot the shard's optimizer keeps.
// FAILED_PRECONDITION naming the shard, the checkpoint variable and `manifest_path`.
absl::Status CheckRestorable(const Manifest& manifest, const std::string& manifest_path,
                             const Shard& shard, const ShardSource& source);

struct RestoredState {
  Shard::State state;
  // The shard's version: that of the checkpoint shard holding its rows. A shard whose rows
  // span several checkpoint shards (another partitioning) takes the highest of their
  // versions: the versions differ only where shards saw different numbers of updates
  // (sparse pushes), and the optimizer's step count (Adam's bias correction, the learning
  // rate's decay) must not run backwards for any of its rows. 0 for params_only.
  int64_t version = 0;
  int64_t bytes_read = 0;
};

// Reads the shard's rows from `reader` straight into fresh blocks (CheckpointReader::
// ReadRowsInto: no copy beyond the kernel's). Its tensors (the parameters and each slot, from
// each checkpoint shard holding some of its rows) are read on up to `threads` threads, the
// caller's included; the state is the same bit for bit whatever their number, and so is the
// error: that of the first failing tensor in the order above. REQUIRES: CheckRestorable
// passed. Throws std::bad_alloc when the fresh blocks do not fit in memory.
absl::StatusOr<RestoredState> ReadShardState(CheckpointReader& reader, const Shard& shard,
                                             const ShardSource& source, int threads = 1);

// The shard's initial state (its initializer, slots at their initial values, version 0).
absl::StatusOr<RestoredState> InitialShardState(const Shard& shard);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_RESTORE_H_
