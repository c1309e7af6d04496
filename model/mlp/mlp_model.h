// The multi-layer perceptron (mlp_spec.h) as a Model: classification of dense feature
// vectors (DataSource::dense(), e.g. Fashion-MNIST). Every variable is read whole; kernels
// start from the job's kernel_initializer and biases from zeros.
//
// Thread safety: as Model.
#ifndef SHARDPS_MODEL_MLP_MLP_MODEL_H_
#define SHARDPS_MODEL_MLP_MLP_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "model/mlp/mlp_spec.h"
#include "model/model.h"
#include "proto/job.pb.h"

namespace shardps {

// job.model() ("softmax", "mlp:256,128") for data.feature_dim inputs and data.num_classes
// classes. INVALID_ARGUMENT as ParseMlpSpec's.
absl::StatusOr<std::unique_ptr<Model>> CreateMlpModel(const JobSpec& job, const DatasetInfo& data);

}  // namespace shardps

#endif  // SHARDPS_MODEL_MLP_MLP_MODEL_H_
