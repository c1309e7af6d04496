// What one step's compute reports, for every model and device: plain structs, so that a
// compute made in the CUDA plugin can fill them.
#ifndef SHARDPS_MODEL_STEP_RESULT_H_
#define SHARDPS_MODEL_STEP_RESULT_H_

#include <cstdint>

namespace shardps {

struct StepResult {
  float loss = 0;       // Mean loss over the batch.
  int64_t correct = 0;  // Examples whose most likely class is the label.
};

struct EvalResult {
  double loss_sum = 0;  // Summed, not mean, so that batches add up exactly.
  int64_t correct = 0;
  int64_t num_examples = 0;
};

}  // namespace shardps

#endif  // SHARDPS_MODEL_STEP_RESULT_H_
