// Reading a model's parameters from a committed checkpoint for the evaluator's sidecar mode:
// each parameter whole, by rows, whatever the sharding that wrote it (CheckpointReader), every
// byte checked against the manifest's CRC-32Cs.
//
// Thread-safety: a function; the reader is used as CheckpointReader allows.
#ifndef SHARDPS_EVALUATOR_CHECKPOINT_PARAMS_H_
#define SHARDPS_EVALUATOR_CHECKPOINT_PARAMS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "checkpoint/checkpoint_reader.h"
#include "evaluator/evaluator.h"

namespace shardps {

// Reads every parameter of `evaluator`'s model from `reader`'s checkpoint into `values` (from
// evaluator.NewValues()). `version` (optional) receives the lowest shard version read.
// FAILED_PRECONDITION naming the variable and the manifest when the checkpoint lacks it or
// holds it with another shape; the reader's error (DATA_LOSS naming the file, NOT_FOUND for a
// file that is gone) otherwise. On error `values` hold nothing usable.
absl::Status ReadCheckpointParams(CheckpointReader* reader, const Evaluator& evaluator,
                                  std::vector<std::vector<float>>* values,
                                  int64_t* version = nullptr);

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_CHECKPOINT_PARAMS_H_
