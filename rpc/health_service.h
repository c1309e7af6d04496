// A gRPC health service (grpc.health.v1.Health, proto/health.proto) for a server that has no
// service of its own: the evaluator listens only to answer health checks. Servers that serve
// shardps services use gRPC's built-in health service instead (Daemon::ServeAt enables it),
// which needs a service of the server's to run on; this one is a synchronous service by
// itself. "" (the server as a whole) is SERVING, or NOT_SERVING once set_serving(false) (a
// daemon draining, as gRPC's own turns when its server shuts down); any other name is
// NOT_FOUND, as in gRPC's.
//
// Thread-safety: set_serving may be called from any thread; Check runs on gRPC's threads.
#ifndef SHARDPS_RPC_HEALTH_SERVICE_H_
#define SHARDPS_RPC_HEALTH_SERVICE_H_

#include <atomic>

#include "proto/health.grpc.pb.h"

namespace shardps {

class HealthOnlyService final : public grpc::health::v1::Health::Service {
 public:
  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  // Not offered (Kubernetes' probes and grpc_health_probe call Check): UNIMPLEMENTED.
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

  // What Check answers for "": SERVING (true, the default) or NOT_SERVING.
  void set_serving(bool serving) { serving_.store(serving, std::memory_order_relaxed); }

 private:
  std::atomic<bool> serving_{true};
};

}  // namespace shardps

#endif  // SHARDPS_RPC_HEALTH_SERVICE_H_
