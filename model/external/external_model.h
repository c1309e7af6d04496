// The external model: a model whose compute lives in the user's code (shardps' Python
// package) rather than in the worker binary. It declares the variables of its job file
// (JobSpec.variables) so that the chief creates them, sizes epochs from
// JobSpec.examples_per_epoch, and computes nothing here: NewCompute, PrepareBatch and the
// steps fail FAILED_PRECONDITION, naming what runs such a model.
//
// Thread-safety: immutable after creation.
#ifndef SHARDPS_MODEL_EXTERNAL_EXTERNAL_MODEL_H_
#define SHARDPS_MODEL_EXTERNAL_EXTERNAL_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "model/model.h"

namespace shardps {

// The model text of a job whose model is external ("model": "external"), and the dataset
// text that goes with it ("dataset": "external").
inline constexpr char kExternalModel[] = "external";
inline constexpr char kExternalDataset[] = "external";

// INVALID_ARGUMENT when the job declares no variables.
absl::StatusOr<std::unique_ptr<Model>> CreateExternalModel(const JobSpec& job);

// The DatasetInfo of an external job's data: examples_per_epoch examples, nothing else known.
DatasetInfo ExternalDatasetInfo(const JobSpec& job);

}  // namespace shardps

#endif  // SHARDPS_MODEL_EXTERNAL_EXTERNAL_MODEL_H_
