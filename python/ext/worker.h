// shardps.Worker's C++ side (python/shardps/worker.py wraps it): a worker task whose steps
// the user's Python code computes. It serves the WorkerService the chief calls, as the
// worker daemon does (worker/rpc/grpc_worker_service.h), over a StepExecutor of its own that
// starts only jobs of model "external" (connects to their ps tasks and checks the variables
// they declare) and hands each step the chief leases to Python, waiting for its result.
//
// Thread-safety: the gRPC side on gRPC's and the executor's threads; the Python side with
// the GIL held, any thread.
#ifndef SHARDPS_PYTHON_EXT_WORKER_H_
#define SHARDPS_PYTHON_EXT_WORKER_H_

#include <pybind11/pybind11.h>

namespace shardps {
namespace python {

// Adds the _Worker and _Step classes to `module`. REQUIRES: DefineClient(module) first.
void DefineWorker(pybind11::module_& module);

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_WORKER_H_
