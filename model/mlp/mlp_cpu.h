// The Eigen implementation of MlpCompute. Prefer NewMlpCompute; this factory exists for tests
// and benchmarks that want the CPU whatever the machine has.
#ifndef SHARDPS_MODEL_MLP_MLP_CPU_H_
#define SHARDPS_MODEL_MLP_MLP_CPU_H_

#include <memory>

#include "model/mlp/mlp_compute.h"

namespace shardps {

// num_threads <= 0: one per hardware thread. The batch is split into at most num_threads
// contiguous slices of at least a few dozen rows; slice gradients are summed in slice order,
// so a result depends only on the inputs and the thread count.
std::unique_ptr<MlpCompute> NewMlpCpuCompute(int num_threads);

}  // namespace shardps

#endif  // SHARDPS_MODEL_MLP_MLP_CPU_H_
