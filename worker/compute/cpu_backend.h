// The Eigen implementation of ComputeBackend. Prefer ComputeBackend::Create; this factory
// exists for tests and benchmarks that want the CPU whatever the machine has.
#ifndef SHARDPS_WORKER_COMPUTE_CPU_BACKEND_H_
#define SHARDPS_WORKER_COMPUTE_CPU_BACKEND_H_

#include <memory>

#include "worker/compute/backend.h"

namespace shardps {

// num_threads <= 0: one per hardware thread. The batch is split into at most num_threads
// contiguous slices of at least a few dozen rows; slice gradients are summed in slice order,
// so a result depends only on the inputs and the thread count.
std::unique_ptr<ComputeBackend> NewCpuBackend(int num_threads);

}  // namespace shardps

#endif  // SHARDPS_WORKER_COMPUTE_CPU_BACKEND_H_
