// SingleTrainer: a job's MLP trained in this process with no network, no chief and no
// partitioning: the limit the benchmarks hold the clusters to. Parameters start as the chief
// creates them (kernels from the job's initializer, biases zero) and slots as a shard starts
// them; each step gathers the job's batch (Batcher, the job's seed), runs forward and backward
// on the CPU backend, and applies the job's optimizer with the ps' own rule (ApplyDense).
//
// Thread-safety: a SingleTrainer is used from one thread.
#ifndef SHARDPS_BENCH_SINGLE_TRAINER_H_
#define SHARDPS_BENCH_SINGLE_TRAINER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "compute/compute_device.h"
#include "data/idx_reader.h"
#include "model/step_result.h"
#include "proto/job.pb.h"

namespace shardps {
namespace bench {

class SingleTrainer {
 public:
  // Wall seconds of one step's phases.
  struct StepTimes {
    double gather_s = 0;   // the batch's indices and examples
    double compute_s = 0;  // forward and backward
    double update_s = 0;   // the optimizer on every parameter
  };

  // `job` as ParseJobSpec returns it (its model, batch size, optimizer, initializer, seed);
  // `data` must outlive the trainer. Computes on `threads` CPU threads.
  static absl::StatusOr<std::unique_ptr<SingleTrainer>> Create(const JobSpec& job,
                                                               const Dataset& data, int threads);
  ~SingleTrainer();

  // What one step did.
  struct Trained {
    StepResult result;     // the batch's mean loss and correct count
    int64_t examples = 0;  // the batch's size (the last of an epoch may be short)
  };

  // Trains the job's step `step` (counted from 0 over epochs: the batch of epoch
  // step / steps_per_epoch()). With `times`, times its phases into it.
  absl::StatusOr<Trained> Step(int64_t step, StepTimes* times = nullptr);

  int64_t steps_per_epoch() const { return steps_per_epoch_; }
  int64_t batch_size() const { return batch_size_; }
  // The parameters now, in Params(model) order.
  const std::vector<std::vector<float>>& params() const { return params_; }
  // The CPU device it computes on, for an evaluator to compute on too (on one thread, as the
  // trainer of time_to_accuracy: no pool of threads at all to compete with training).
  const ComputeDevice& device() const;

 private:
  class Parts;
  SingleTrainer(const JobSpec& job, const Dataset& data, std::unique_ptr<Parts> parts);
  absl::Status Initialize(const JobSpec& job);

  const Dataset& data_;
  const int64_t batch_size_;
  std::unique_ptr<Parts> parts_;  // model, backend, optimizer, batcher
  int64_t steps_per_epoch_ = 0;
  std::vector<std::vector<float>> params_, grads_;
  std::vector<std::vector<std::vector<float>>> slots_;  // per parameter, per slot
  std::vector<const float*> param_ptrs_;
  std::vector<float*> grad_ptrs_;
  std::vector<std::vector<float*>> slot_ptrs_;
  std::vector<float> features_;
  std::vector<int32_t> labels_;
};

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_SINGLE_TRAINER_H_
