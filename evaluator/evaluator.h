// Evaluator: a model's parameters in, its metrics on the held-out data out. Given a job (its
// model and dataset), it loads the test split once and evaluates any values of the model's
// parameters on every test example exactly once. Both of the evaluator daemon's modes use it
// (evaluator/job_follower.h: a consistent snapshot pulled from the ps; evaluator/sidecar.h: a
// committed checkpoint), so the same parameters give the same metrics, to the last bit, from
// either source.
//
// No gRPC and no I/O besides loading the test set.
//
// Thread-safety: Evaluate may be called from several threads; the model's compute runs one
// call at a time, so they take turns (use one thread).
#ifndef SHARDPS_EVALUATOR_EVALUATOR_H_
#define SHARDPS_EVALUATOR_EVALUATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/data_root.h"
#include "compute/compute_device.h"
#include "data/dataset.h"
#include "model/model.h"
#include "proto/job.pb.h"

namespace shardps {

class Evaluator {
 public:
  // Loads the test split of job.dataset() in job.data_dir() (empty: the default directory)
  // and creates job.model() (model/model.h). FAILED_PRECONDITION naming the directory when
  // the data cannot be loaded; INVALID_ARGUMENT for a bad model text. The model computes on
  // `device` (its compute's errors otherwise). PERMISSION_DENIED naming data_dir when it lies
  // outside `data_root` and its dataset roots.
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(const JobSpec& job,
                                                           const ComputeDevice& device,
                                                           const DataRoot& data_root = DataRoot());

  const JobSpec& job() const { return job_; }
  // The model's variables, in Model::variables() order.
  const std::vector<VariableInfo>& params() const { return model_->variables(); }
  // Their variables' names, "{job name}/{param name}" (on the ps and in checkpoints).
  const std::vector<std::string>& variable_names() const { return variable_names_; }
  // One zeroed buffer per variable: a dense variable's holds all of it; a variable a step
  // reads by rows (an embedding table, fixed or dynamic) holds only the rows of row_keys(i).
  // A table of 10^7 rows is read by a test split of 10^4 examples at a few 10^4 rows: the
  // evaluator pulls, keeps and reads from checkpoints only those.
  std::vector<std::vector<float>> NewValues() const;
  // The ids of variable i that the test split reads, sorted and distinct: row indices of a
  // fixed table, keys of a dynamic one (VariableInfo::dynamic); empty for a dense variable.
  // The variable's values are these rows, in this order.
  const std::vector<int64_t>& row_keys(size_t i) const { return row_keys_[i]; }

  // Evaluates every test example once, in batches of 1000, with `values` (one per parameter,
  // in order, each as NewValues() sizes it). Sets examples, loss (mean), accuracy and
  // unix_time; for a click model also auc (exact, over the whole test split) and, where the
  // data knows it, auc_ceiling (the planted model's AUC on the same examples); the caller sets what says where the values came from (step, checkpoint_id,
  // steps_done). INVALID_ARGUMENT naming the parameter when a value has the wrong size.
  absl::StatusOr<EvalMetrics> Evaluate(const std::vector<std::vector<float>>& values) const;

 private:
  Evaluator(JobSpec job, std::unique_ptr<ModelCompute> compute, std::unique_ptr<Model> model,
            std::shared_ptr<const DataSource> test);
  // Fills row_keys_ with one pass over the test split; INVALID_ARGUMENT naming the variable
  // for an id outside a fixed table.
  absl::Status CollectRowKeys();
  // The number of floats of variable i's values.
  size_t ValuesSize(size_t i) const;

  const JobSpec job_;
  const std::unique_ptr<ModelCompute> compute_;  // the model's, on the device
  const std::unique_ptr<Model> model_;
  const std::shared_ptr<const DataSource> test_;
  std::vector<std::string> variable_names_;
  std::vector<std::vector<int64_t>> row_keys_;  // per variable
};

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_EVALUATOR_H_
