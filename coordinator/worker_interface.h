// WorkerInterface: how the chief talks to one worker task, transport-neutral (the gRPC
// implementation is in coordinator/rpc/; tests may plug in fakes). Same calling convention as
// PsInterface: *Async returns at once and calls `done` exactly once, on some thread.
// CancelAll ends every call in flight early, through its `done` (how a stopping chief
// outlives its calls without waiting out their deadlines).
//
// Thread-safety: implementations are thread-safe.
#ifndef SHARDPS_COORDINATOR_WORKER_INTERFACE_H_
#define SHARDPS_COORDINATOR_WORKER_INTERFACE_H_

#include <string>

#include "absl/time/time.h"
#include "client/ps_interface.h"
#include "proto/worker.pb.h"

namespace shardps {

class WorkerInterface {
 public:
  virtual ~WorkerInterface() = default;
  virtual const std::string& address() const = 0;
  virtual void StartJobAsync(const StartJobRequest* request, StartJobResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;
  virtual void RunStepAsync(const StepRequest* request, StepResponse* response,
                            absl::Time deadline, StatusCallback done) = 0;
  virtual void StatusAsync(const WorkerStatusRequest* request, WorkerStatusResponse* response,
                           absl::Time deadline, StatusCallback done) = 0;
  virtual void ShutdownAsync(const WorkerShutdownRequest* request,
                             WorkerShutdownResponse* response, absl::Time deadline,
                             StatusCallback done) = 0;

  // Cancels every call in flight: each still calls its `done` exactly once, soon, with
  // CANCELLED (or with the status it had already come back with). Calls started afterwards
  // are not affected. A `done` may run on the calling thread before CancelAll returns: call
  // it holding no lock that a callback takes.
  virtual void CancelAll() = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_WORKER_INTERFACE_H_
