// The Eigen implementation of DlrmCompute. Prefer CreateDlrmCompute; this factory exists for
// tests and benchmarks that want the CPU whatever the machine has.
#ifndef SHARDPS_MODEL_DLRM_DLRM_CPU_H_
#define SHARDPS_MODEL_DLRM_DLRM_CPU_H_

#include <memory>

#include "model/dlrm/dlrm_compute.h"

namespace shardps {

// num_threads <= 0: one per hardware thread. The batch is split into at most num_threads
// contiguous slices of at least a few dozen examples; the dense gradients of the slices are
// summed in slice order, and each table's row gradients are accumulated in example order, so a
// result depends only on the inputs and the thread count.
std::unique_ptr<DlrmCompute> NewDlrmCpuCompute(int num_threads);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_CPU_H_
