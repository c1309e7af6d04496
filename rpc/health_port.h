// HealthPort: a second, plaintext server of a daemon that answers only gRPC's health check
// (grpc.health.v1.Health/Check), for probes that cannot speak TLS: Kubernetes' gRPC probes
// dial without TLS, so they cannot reach a daemon's main port once it serves with
// certificates. It serves nothing else (any other service is UNIMPLEMENTED) and reads at most
// a few KiB a request, which is why the binding rule (rpc/tls.h's CheckBinding) does not apply
// to it: it tells whether the daemon serves, nothing more. --health_port (rpc/daemon.h) turns
// it on; RunDaemon (rpc/daemon_run.h) starts it after the main server and answers NOT_SERVING
// from it while the main server drains, as gRPC's own health service there does.
//
// Thread-safety: Start and the destructor are called from one thread (main()'s); SetServing
// may be called from any thread.
#ifndef SHARDPS_RPC_HEALTH_PORT_H_
#define SHARDPS_RPC_HEALTH_PORT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/server.h"
#include "rpc/health_service.h"

namespace shardps {

class HealthPort {
 public:
  // Listens on `listen` ("host:port"), plaintext. UNAVAILABLE naming the address when it
  // cannot (the port taken, a bad host).
  static absl::StatusOr<std::unique_ptr<HealthPort>> Start(const std::string& listen);
  // Stops the server at once (a health check in flight is cancelled).
  ~HealthPort();

  HealthPort(const HealthPort&) = delete;
  HealthPort& operator=(const HealthPort&) = delete;

  // Where it listens, "host:port".
  const std::string& address() const { return address_; }
  // SERVING (true) or NOT_SERVING for the server as a whole ("").
  void SetServing(bool serving) { service_.set_serving(serving); }

 private:
  HealthPort() = default;

  HealthOnlyService service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

}  // namespace shardps

#endif  // SHARDPS_RPC_HEALTH_PORT_H_
