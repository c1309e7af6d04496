// The evaluator's ChiefLink over gRPC: CoordinatorService calls with a deadline each, so that
// a chief that does not answer never hangs the evaluator. The channel reconnects by itself
// after the chief restarts.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_EVALUATOR_RPC_GRPC_CHIEF_LINK_H_
#define SHARDPS_EVALUATOR_RPC_GRPC_CHIEF_LINK_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "evaluator/chief_link.h"

namespace shardps {

std::unique_ptr<ChiefLink> NewGrpcChiefLink(const std::string& address,
                                            absl::Duration call_timeout = absl::Seconds(5));

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_RPC_GRPC_CHIEF_LINK_H_
