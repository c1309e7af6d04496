// ModelTrainer: any job's model (model/model.h: the MLP, the DLRM click model, ...) trained in
// this process with no ps, no network and no chief: the compute limit a cluster's benchmark
// holds it to. The variables start as the chief creates them (coordinator/job_preparation.h's
// JobVariables: names, initializers, the job's optimizer or its embedding optimizer for
// tables); each step takes the job's batch (data/batcher.h, the job's seed: the batches a
// worker would be leased), copies the values the step reads (a dense variable whole, a
// table's rows for the batch's ids) as a worker's pull would, runs the model's forward and
// backward on the CPU, and applies the gradients with the ps' own optimizer rules
// (math/optimizer.h; a table's rows by ApplyRows, as the ps applies a row push). It evaluates
// with the evaluator's own code (evaluator/evaluator.h) on the job's test split.
//
// Whole tables live in memory: a job with a dynamic (hashed-key) table is refused.
//
// Thread-safety: a ModelTrainer is used from one thread.
#ifndef SHARDPS_BENCH_MODEL_TRAINER_H_
#define SHARDPS_BENCH_MODEL_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/job.pb.h"

namespace shardps {
namespace bench {

class ModelTrainer {
 public:
  // Loads the job's training split (and, for Evaluate, its test split) and sets up the
  // variables; computes on `threads` CPU threads. INVALID_ARGUMENT for a model with a
  // dynamic table; the data's, the model's and the initializers' errors.
  static absl::StatusOr<std::unique_ptr<ModelTrainer>> Create(const JobSpec& job, int threads);
  ~ModelTrainer();

  // What one step did.
  struct Trained {
    double loss = 0;       // the batch's mean loss
    int64_t examples = 0;  // the batch's size (the last of an epoch may be short)
  };
  // Wall seconds of one step's phases.
  struct StepTimes {
    double batch_s = 0;    // the batch's examples and ids, and the values it reads
    double compute_s = 0;  // forward and backward
    double update_s = 0;   // the optimizer on every variable the step touched
  };

  // Trains the job's step `step`, counted from 0 over epochs (the batch of epoch
  // step / steps_per_epoch()). With `times`, times its phases into it.
  absl::StatusOr<Trained> Step(int64_t step, StepTimes* times = nullptr);

  // The test split evaluated with the variables now (loss, accuracy; AUC for a click model):
  // CopyForEvaluation, then EvaluateCopy.
  absl::StatusOr<EvalMetrics> Evaluate();
  // Evaluate in two halves, for an evaluation beside the training (bench/background_runner.h):
  // CopyForEvaluation, on the training thread between steps, copies what the test split reads
  // (dense variables whole, the tables' rows it names: what the evaluator daemon pulls);
  // EvaluateCopy, on one other thread while training goes on, evaluates that copy on one
  // compute thread of its own. REQUIRES: no EvaluateCopy runs during a CopyForEvaluation.
  absl::Status CopyForEvaluation();
  absl::StatusOr<EvalMetrics> EvaluateCopy();

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t total_steps() const;
  // Examples in the first `steps` steps (the last batch of an epoch is short).
  int64_t ExamplesIn(int64_t steps) const;
  // Every variable's values now, in Model::variables() order (tables whole).
  const std::vector<std::vector<float>>& values() const;

 private:
  class Parts;
  explicit ModelTrainer(std::unique_ptr<Parts> parts);

  std::unique_ptr<Parts> parts_;
  int64_t steps_per_epoch_ = 0;
};

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_MODEL_TRAINER_H_
