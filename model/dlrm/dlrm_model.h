// The DLRM-style click model (dlrm_spec.h) as a Model, on click-log data
// (DataSource::ctr()). Its dense layers are variables read whole; its embedding tables,
// "embedding/<feature>" of shape {vocab_size, dim}, one per categorical feature of the data,
// are read by rows: PrepareBatch deduplicates each table's ids in the batch (first occurrence
// first), so the worker pulls and pushes each row once per step, and the compute gets the
// per-example positions of an example's ids among the pulled rows.
//
// Kernels start from the job's kernel_initializer, biases from zeros, embedding rows uniform
// in [-0.05, 0.05) (Keras' Embedding default) seeded by the job. The tables take the job's
// embedding_optimizer when it has one (Adagrad is TensorFlow's usual choice for them), the
// dense layers the job's optimizer.
//
// Thread safety: as Model.
#ifndef SHARDPS_MODEL_DLRM_DLRM_MODEL_H_
#define SHARDPS_MODEL_DLRM_DLRM_MODEL_H_

#include <memory>

#include "absl/status/statusor.h"
#include "data/dataset.h"
#include "model/model.h"
#include "proto/job.pb.h"

namespace shardps {

inline constexpr char kDlrmPrefix[] = "dlrm";

// job.model() ("dlrm:..." or "dlrm") on click-log data: the tables come from data.ctr.
// INVALID_ARGUMENT naming the model text when it cannot be parsed, when the data is not click
// logs, or when a feature has unbounded (hashed) ids, which need a dynamic table.
absl::StatusOr<std::unique_ptr<Model>> CreateDlrmModel(const JobSpec& job, const DatasetInfo& data);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_MODEL_H_
