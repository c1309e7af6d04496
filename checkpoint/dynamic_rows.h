// Reading a dynamic table (ManifestVariable::num_buckets > 0) out of a checkpoint: its rows
// at that checkpoint's cut. A dynamic shard's file holds every row (base_checkpoint 0) or only
// the rows changed, and the keys deleted, since its base checkpoint's cut (Check-N-Run's
// increments); the base is read first, down to a full checkpoint, then each increment in
// order: its deleted keys erased, its rows written. Bases are found beside the checkpoint, in
// the same checkpoint directory (CheckpointDir::CheckpointPath).
//
// Every tensor is checked against the CRC-32C its manifest lists (DATA_LOSS naming the file
// and tensor); a missing base checkpoint is FAILED_PRECONDITION naming it. Keys are filtered
// by the caller (`keep`: say, the buckets a ps shard holds), so a checkpoint of any bucket
// split restores into any other.
//
// Thread-safety: a function; call it from any thread.
#ifndef SHARDPS_CHECKPOINT_DYNAMIC_ROWS_H_
#define SHARDPS_CHECKPOINT_DYNAMIC_ROWS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "checkpoint/manifest.h"

namespace shardps {

// Rows of one checkpoint shard, as kept: keys, each row's last push step, and one tensor per
// name asked for (parameters "" and slots), keys.size() x dim floats each.
struct DynamicRowsPart {
  std::vector<int64_t> keys;
  std::vector<uint32_t> last_steps;
  std::vector<std::vector<float>> tensors;
};

struct DynamicTableReadStats {
  int64_t version = 0;      // the highest version of the checkpoint's shards of the variable
  int64_t bytes_read = 0;   // tensor bytes read, over the whole chain
  int checkpoints = 0;      // read in the chain (1 for a full checkpoint)
};

// Reads dynamic table `variable` of the checkpoint whose manifest (at `manifest_path`) is
// `manifest`: calls erase(keys) and upsert(part) in chain order, only for keys with
// keep(key). `tensors`: which tensors each part holds, "" for the parameters or slot names
// of the variable. FAILED_PRECONDITION naming the variable when it is not a dynamic table of
// the manifest.
absl::Status ReadDynamicTable(
    const Manifest& manifest, const std::string& manifest_path, const std::string& variable,
    const std::vector<std::string>& tensors, absl::FunctionRef<bool(int64_t)> keep,
    absl::FunctionRef<absl::Status(const std::vector<int64_t>&)> erase,
    absl::FunctionRef<absl::Status(DynamicRowsPart&)> upsert, DynamicTableReadStats* stats);

}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_DYNAMIC_ROWS_H_
