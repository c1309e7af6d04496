// Models as the worker, the chief and the evaluator see them. A model declares its variables
// (name, shape, initial value, and how a step reads and updates each: whole, or by rows) and
// runs a step's compute (NewCompute, made for the device the process chose) on buffers the
// caller filled from the ps. Before a step pulls, PrepareBatch names, for each variable read by
// rows, the distinct ids the batch needs, so that the worker pulls and pushes those rows only.
// The chief creates a model from the data's description alone (DescribeDataset), never
// loading an example.
//
// Thread safety: a Model is immutable after Create; its methods may be called from many
// threads, each with its own StepBuffers. A ModelCompute runs one call at a time (callers
// may share it; its calls then wait for each other).
#ifndef SHARDPS_MODEL_MODEL_H_
#define SHARDPS_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "compute/compute_device.h"
#include "data/dataset.h"
#include "model/step_result.h"
#include "proto/job.pb.h"
#include "proto/ps.pb.h"

namespace shardps {

// How a step reads and updates a variable.
enum class VariableAccess {
  kDense,  // whole: every step pulls all of it and pushes a gradient for all of it
  kRows,   // by rows (axis 0): a step pulls and pushes only the rows its batch names
};

struct VariableInfo {
  std::string name;            // within the job, e.g. "dense_0/kernel"; the ps holds "{job}/{name}"
  std::vector<int64_t> shape;  // the whole variable's, row-major; rows are along axis 0
  VariableAccess access = VariableAccess::kDense;
  InitializerSpec initializer;  // chosen by the model for the variable's role
  // A dynamic table (kRows only): rows keyed by any int64 (hashed ids), shape [0, dim], held
  // by the ps as a DynamicSpec shard (rows exist once pushed; proto/ps.proto). Read only by
  // the rows a batch names, never whole.
  bool dynamic = false;

  int64_t num_elements() const;
  // Elements per row: the product of shape[1:] (1 for a vector).
  int64_t row_width() const;
};

// A model's own view of one batch (its features, labels, per-example ids...), built by
// PrepareBatch and read by the compute.
class ModelBatch {
 public:
  virtual ~ModelBatch() = default;
};

// One step's buffers, one entry per variable in Model::variables() order. The caller pulls
// into `values` and pushes `grads`; PrepareBatch sizes both.
struct StepBuffers {
  int batch_size = 0;  // examples in the batch
  // kRows: the distinct ids the batch reads, in the order of their rows in values and
  // grads. kDense: empty.
  std::vector<std::vector<int64_t>> ids;
  // kDense: num_elements() floats; kRows: ids.size() x row_width().
  std::vector<std::vector<float>> values;
  std::vector<std::vector<float>> grads;  // the same sizes as values
  std::unique_ptr<ModelBatch> batch;
};

// What a model computes with on one device: made by Model::NewCompute, read only by a model
// of the same kind (FAILED_PRECONDITION otherwise).
class ModelCompute {
 public:
  virtual ~ModelCompute() = default;

  // "cpu (Eigen, 4 threads)" or "gpu (NVIDIA H100 80GB HBM3)".
  virtual std::string Name() const = 0;
};

// One evaluated batch.
struct BatchEval {
  EvalResult totals;  // summed loss, correct predictions, examples
  // Binary classifiers (click models): per example, the predicted probability of label 1 and
  // the label, for AUC. Empty for other models.
  std::vector<float> scores;
  std::vector<float> labels;
};

class Model {
 public:
  // job.model() for data shaped as `data` says (the chief passes DescribeDataset's, a worker
  // its loaded source's). INVALID_ARGUMENT naming the model text when it cannot be parsed or
  // cannot train on that data.
  static absl::StatusOr<std::unique_ptr<Model>> Create(const JobSpec& job,
                                                       const DatasetInfo& data);

  virtual ~Model() = default;

  // The canonical model text ("mlp:256,128").
  virtual std::string ToString() const = 0;

  // The compute this model runs on `device`: its CPU kernels on the device's threads, or its
  // CUDA kernels through the device's plugin. The compute's errors (INTERNAL when a GPU fails
  // to initialize, say).
  virtual absl::StatusOr<std::unique_ptr<ModelCompute>> NewCompute(
      const ComputeDevice& device) const = 0;

  // In the order of every StepBuffers entry.
  virtual const std::vector<VariableInfo>& variables() const = 0;

  // Reads examples `indices` of `data` into step->batch, sets step->ids of the variables read
  // by rows, and sizes step->values and step->grads (keeping their capacity, so a reused
  // StepBuffers allocates nothing in steady state). INVALID_ARGUMENT naming the position and
  // index of an example outside the data, or when `data` is not of the kind the model trains
  // on.
  virtual absl::Status PrepareBatch(const DataSource& data, absl::Span<const int64_t> indices,
                                    StepBuffers* step) const = 0;

  // Loss and metrics of the prepared batch on step->values into *out (correct: examples whose
  // most likely class, for a click model whether p >= 0.5, is the label), and the gradients
  // of the mean loss into step->grads (for rows: of the rows in step->ids), on `compute`
  // (made by NewCompute). FAILED_PRECONDITION when the step was not prepared by this model or
  // the compute was not made by a model of its kind; the compute's errors.
  virtual absl::Status ForwardBackward(ModelCompute* compute, StepBuffers* step,
                                       StepResult* out) const = 0;

  // Forward only: summed loss and metrics of the prepared batch into *out. Same errors.
  virtual absl::Status Evaluate(ModelCompute* compute, const StepBuffers& step,
                                BatchEval* out) const = 0;
};

// Sizes `step` for `model`: one entry per variable, dense ones whole (what every model's
// PrepareBatch does first). Row variables are left to the model, which knows their ids.
void SizeDenseBuffers(const std::vector<VariableInfo>& variables, StepBuffers* step);

}  // namespace shardps

#endif  // SHARDPS_MODEL_MODEL_H_
