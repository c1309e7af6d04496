// The manifest of a checkpoint (manifest.json in the checkpoint's directory): what the
// checkpoint holds and how to read it, written last by the chief, its rename the commit
// point. A checkpoint directory without a manifest does not exist.
//
//   {"format": "shardps-checkpoint", "format_version": 1,
//    "checkpoint_id": 7, "job_id": "fashion-mlp-1a2b3c4d", "generation": 2,
//    "unix_time": 1795412345.5, "final": false,
//    "job": { ...the job file, as JobSpecToJson writes it... },
//    "progress": {"steps_done": 4200, "total_steps": 14070, "steps_per_epoch": 469,
//                 "epoch": 8, "batch_index": 448},
//    "variables": [{"name": "mlp/dense_0/kernel", "shape": [784, 256], "dtype": "F32",
//                   "partitioner": "min_size:262144:2", "slots": ["adam_m", "adam_v"],
//                   "optimizer": {...}, "initializer": {...}, "update": {...},
//                   "shards": [{"name": "mlp/dense_0/kernel/part_0", "part": 0,
//                               "num_parts": 2, "row_offset": 0, "rows": 392, "ps": 0,
//                               "version": 4200, "file": "ps-00000-of-00002.safetensors",
//                               "tensors": {"": "mlp/dense_0/kernel/part_0",
//                                           "adam_m": "mlp/dense_0/kernel/part_0/adam_m",
//                                           "adam_v": "mlp/dense_0/kernel/part_0/adam_v"}}]}],
//    "files": [{"file": "ps-00000-of-00002.safetensors", "bytes": 1234, "crc32c": 305419896,
//               "header_crc32c": 4660, "tensors": [{"name": ..., "dtype": "F32",
//               "shape": [392, 256], "data_offsets": [0, 401408], "crc32c": 22136}]}],
//    "eval": {"accuracy": 0.8812, "loss": 0.33, "step": 4200}}
//
// A dynamic table has "shape": [0, dim] and "dynamic": {"num_buckets": N}; each of its
// shards "buckets": [begin, end) and "base_checkpoint" (the checkpoint its rows are the
// changes since, 0 for all), its rows being those in its file, and tensors "keys",
// "last_steps" and "deleted_keys" beside the parameters and slots. An increment is read on
// top of its base's manifest, down to a full one (checkpoint/dynamic_rows.h).
//
// "progress.steps_done" is a prefix: a checkpoint is cut where steps [0, steps_done) are
// wholly applied on every ps and no later step is applied anywhere. The optimizer's step
// count and the learning-rate schedule's position are each shard's "version" (its updates).
// Slot tensors are keyed by slot name; "" is the parameters.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_CHECKPOINT_MANIFEST_H_
#define SHARDPS_CHECKPOINT_MANIFEST_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/ps.pb.h"

namespace shardps {

inline constexpr char kManifestFormat[] = "shardps-checkpoint";
inline constexpr int kManifestFormatVersion = 1;

struct ManifestShard {
  std::string name;
  int32_t part = 0;
  int32_t num_parts = 1;
  int64_t row_offset = 0;
  int64_t rows = 0;
  int32_t ps = 0;
  int64_t version = 0;
  std::string file;
  std::map<std::string, std::string> tensors;  // slot ("" = parameters) -> tensor name
  // A dynamic table's shard: the buckets it holds, and the checkpoint its rows are changes
  // since (0: every row). `rows` are then the rows in its file, and its tensors also name
  // "keys" (I64 [rows]), "last_steps" (U32 [rows]) and "deleted_keys" (I64 [m]).
  int32_t bucket_begin = 0;
  int32_t bucket_end = 0;
  int64_t base_checkpoint = 0;
};

// The extra tensors of a dynamic table's shard (ManifestShard::tensors keys).
inline constexpr char kKeysTensor[] = "keys";
inline constexpr char kLastStepsTensor[] = "last_steps";
inline constexpr char kDeletedKeysTensor[] = "deleted_keys";

struct ManifestVariable {
  std::string name;
  std::vector<int64_t> shape;  // [] for a scalar (one row of width 1)
  std::string dtype = "F32";
  std::string partitioner;
  std::vector<std::string> slots;  // slot names, in the optimizer's order
  OptimizerSpec optimizer;
  InitializerSpec initializer;
  UpdateSpec update;
  // > 0: a dynamic table (shape [0, dim]) whose shards cover its buckets [0, num_buckets)
  // exactly once, in order, instead of rows.
  int32_t num_buckets = 0;
  std::vector<ManifestShard> shards;  // in row order, covering every row exactly once
};

struct ManifestProgress {
  int64_t steps_done = 0;
  int64_t total_steps = 0;
  int64_t steps_per_epoch = 0;
  int64_t epoch = 0;
  int64_t batch_index = 0;
};

struct ManifestEval {
  double accuracy = 0;
  double loss = 0;
  int64_t step = 0;
};

struct Manifest {
  int format_version = kManifestFormatVersion;
  int64_t checkpoint_id = 0;
  std::string job_id;
  int64_t generation = 0;
  double unix_time = 0;
  bool final = false;
  std::string job_json;  // the job file (a JSON object, embedded as is under "job")
  ManifestProgress progress;
  std::vector<ManifestVariable> variables;
  std::vector<DataFileInfo> files;
  std::optional<ManifestEval> eval;

  const ManifestVariable* FindVariable(absl::string_view name) const;
  const DataFileInfo* FindFile(absl::string_view file) const;
};

// Pretty-printed JSON (2-space indent), ending in a newline.
std::string ManifestToJson(const Manifest& manifest);

// Parses and checks a manifest: format and version, every field's type, shards covering each
// variable's rows exactly once in order, every shard's file and tensors listed under "files"
// with shapes matching the shard. Errors are DATA_LOSS naming `source` (the file) and the
// field ("manifest.json: variables[2].shards[1].rows: ...").
absl::StatusOr<Manifest> ParseManifest(absl::string_view json, absl::string_view source);

}  // namespace shardps

#endif  // SHARDPS_CHECKPOINT_MANIFEST_H_
