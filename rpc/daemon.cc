#include "rpc/daemon.h"

#include <signal.h>

#include <cstdlib>
#include <iostream>
#include <thread>

#include "common/daemon_config.h"
#include "common/process_tuning.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "rpc/grpc_util.h"

namespace shardps {

struct Daemon::Shared {
  absl::Notification stop;
};

void Daemon::BlockTerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

Daemon::Daemon(std::string task_type, FlagParser* flags, bool serves)
    : task_type_(std::move(task_type)), flags_(flags), shared_(std::make_shared<Shared>()) {
  flags_->AddString("tf_config", &tf_config_flag_,
                    "cluster config: inline JSON or a file path (default: $TF_CONFIG)");
  flags_->AddBool("validate_config", &validate_only_,
                  "only validate the configuration: print the task and address, exit 0 or 2");
  if (serves) {
    flags_->AddString("bind_host", &bind_host_,
                      "host to listen on (default: all interfaces; the port is TF_CONFIG's)");
    flags_->AddBool("long_lived", &long_lived_,
                    "keep serving after a job ends (ignore Shutdown requests)");
  }
}

Daemon::~Daemon() = default;

int Daemon::Init(int argc, char** argv) {
  TuneMallocForBulkTransfers();
  DisableMutexDeadlockDetection();
  int rc = HandleParseResult(*flags_, flags_->Parse(argc, argv));
  if (rc >= 0) return rc;
  if (validate_only_) {
    return ValidateConfigMain(LoadTfConfig(tf_config_flag_, std::getenv("TF_CONFIG")),
                              task_type_, std::cout, std::cerr);
  }
  absl::StatusOr<TfConfig> config =
      LoadDaemonConfig(tf_config_flag_, std::getenv("TF_CONFIG"), task_type_);
  if (!config.ok()) {
    std::cerr << "error: " << config.status().message() << "\n";
    return kConfigInvalid;
  }
  config_ = *std::move(config);
  // The signal thread holds the shared state, so it may outlive this object at exit.
  std::thread([shared = shared_, type = task_type_] {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    int sig = 0;
    if (sigwait(&set, &sig) == 0) {
      std::cerr << type << ": signal " << sig << ", stopping\n";
      if (!shared->stop.HasBeenNotified()) shared->stop.Notify();
    }
  }).detach();
  return -1;
}

std::unique_ptr<grpc::Server> Daemon::Serve(const std::vector<grpc::Service*>& services) {
  absl::StatusOr<std::string> listen = ListenAddress(config_.TaskAddress(), bind_host_);
  if (!listen.ok()) {
    std::cerr << "error: " << listen.status().message() << "\n";
    return nullptr;
  }
  listen_ = *listen;
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  int bound_port = 0;
  builder.AddListeningPort(listen_, grpc::InsecureServerCredentials(), &bound_port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    std::cerr << "error: " << task_type_ << ": cannot listen on " << listen_
              << " (port in use?)\n";
    return nullptr;
  }
  return server;
}

void Daemon::RequestStop(const std::string& why, bool from_rpc) {
  bool ignored = from_rpc && long_lived_;
  std::cerr << task_type_ << ": stop requested" << (why.empty() ? "" : ": ") << why
            << (ignored ? " (ignored: --long_lived)" : "") << "\n";
  if (!ignored && !shared_->stop.HasBeenNotified()) shared_->stop.Notify();
}

void Daemon::WaitForStop() { shared_->stop.WaitForNotification(); }

bool Daemon::WaitForStopWithTimeout(absl::Duration timeout) {
  return shared_->stop.WaitForNotificationWithTimeout(timeout);
}

bool Daemon::stop_requested() const { return shared_->stop.HasBeenNotified(); }

}  // namespace shardps
