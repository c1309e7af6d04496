#include "rpc/health_service.h"

#include <string>

namespace shardps {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

grpc::Status HealthOnlyService::Check(grpc::ServerContext*, const HealthCheckRequest* request,
                                      HealthCheckResponse* response) {
  if (!request->service().empty()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "health check: no service \"" + request->service() +
                            "\" here; ask about \"\" (the server as a whole)");
  }
  response->set_status(serving_.load(std::memory_order_relaxed) ? HealthCheckResponse::SERVING
                                                                : HealthCheckResponse::NOT_SERVING);
  return grpc::Status::OK;
}

grpc::Status HealthOnlyService::Watch(grpc::ServerContext*, const HealthCheckRequest*,
                                      grpc::ServerWriter<HealthCheckResponse>*) {
  return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                      "health Watch is not offered here; use Check");
}

}  // namespace shardps
