#include "rpc/health_port.h"

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/ext/health_check_service_server_builder_option.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "rpc/grpc_util.h"

namespace shardps {
namespace {

// A health check request is a service name: a few bytes.
constexpr int kMaxRequestBytes = 4096;

}  // namespace

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::Start(const std::string& listen) {
  std::unique_ptr<HealthPort> port(new HealthPort());
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  builder.SetMaxReceiveMessageSize(kMaxRequestBytes);
  // Ours is the only health service here: no default one beside it.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  int bound = 0;
  builder.AddListeningPort(listen, grpc::InsecureServerCredentials(), &bound);
  builder.RegisterService(&port->service_);
  port->server_ = builder.BuildAndStart();
  if (port->server_ == nullptr || bound == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", listen, " (port in use?)"));
  }
  port->address_ = absl::StrCat(listen.substr(0, listen.rfind(':')), ":", bound);
  return port;
}

HealthPort::~HealthPort() {
  if (server_ != nullptr) {
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
  }
}

}  // namespace shardps
