// ChiefLink: the evaluator's two calls to the chief (CoordinatorService), behind an interface
// so that the evaluator's loops are tested against a scripted chief. The gRPC implementation
// is evaluator/rpc/grpc_chief_link.h.
//
// Thread-safety: implementations are thread-safe.
#ifndef SHARDPS_EVALUATOR_CHIEF_LINK_H_
#define SHARDPS_EVALUATOR_CHIEF_LINK_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/coordinator.pb.h"

namespace shardps {

class ChiefLink {
 public:
  virtual ~ChiefLink() = default;
  // The chief's JobStatus; UNAVAILABLE (or DEADLINE_EXCEEDED) while it is unreachable.
  virtual absl::StatusOr<JobStatus> GetStatus() = 0;
  // NOT_FOUND when request.job_id() is not the chief's current job.
  virtual absl::Status ReportEval(const ReportEvalRequest& request) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_CHIEF_LINK_H_
