#include "rpc/daemon_run.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"
#include "rpc/grpc_util.h"
#include "rpc/health_port.h"

namespace shardps {
namespace {

// Ends the process with `exit_code` unless destroyed within `grace` (an infinite grace: never).
class ShutdownDeadline {
 public:
  ShutdownDeadline(absl::Duration grace, int exit_code) {
    if (grace == absl::InfiniteDuration()) return;
    thread_ = std::thread([this, grace, exit_code] {
      if (!done_.WaitForNotificationWithTimeout(grace)) {
        LogWarning() << "still shutting down after " << grace
                     << " (a call has not ended); exiting anyway (exit code " << exit_code << ")";
        std::_Exit(exit_code);
      }
    });
  }
  ~ShutdownDeadline() {
    done_.Notify();
    if (thread_.joinable()) thread_.join();
  }

 private:
  absl::Notification done_;
  std::thread thread_;
};

// How long the server lets calls in flight finish before it cancels them.
constexpr std::chrono::seconds kDrainTime(2);

// --health_port's address: the host the main server listens on (without one, every
// interface), or --bind_host.
absl::StatusOr<std::string> HealthListenAddress(const Daemon& daemon, bool serving) {
  const std::string& main = daemon.listen_address();
  const std::string host = serving ? main.substr(0, main.rfind(':')) : "0.0.0.0";
  return ListenAddress(absl::StrCat(host, ":", daemon.health_port()), daemon.bind_host());
}

}  // namespace

int DaemonBody::Run(Daemon& daemon) {
  daemon.WaitForStop();
  return daemon.StopExitCode();
}

int RunDaemon(Daemon& daemon, DaemonBody& body, const RunOptions& options) {
  std::unique_ptr<grpc::Server> server;
  if (options.listen != RunOptions::Listen::kNone) {
    server = options.listen == RunOptions::Listen::kTaskAddress
                 ? daemon.Serve(body.Services())
                 : daemon.ServeAt(options.address, body.Services());
    if (server == nullptr) return daemon.serve_exit_code();
  }
  std::unique_ptr<HealthPort> health;
  if (daemon.health_port() > 0) {
    absl::StatusOr<std::string> listen = HealthListenAddress(daemon, server != nullptr);
    absl::StatusOr<std::unique_ptr<HealthPort>> started =
        listen.ok() ? HealthPort::Start(*listen)
                    : absl::StatusOr<std::unique_ptr<HealthPort>>(listen.status());
    if (!started.ok()) {
      LogError() << "--health_port: " << started.status().message();
      return kExitError;
    }
    health = *std::move(started);
    LogInfo() << "health checks on " << health->address()
              << " (plaintext, grpc.health.v1 only)";
  }
  LogInfo() << (daemon.has_config() ? daemon.config().DebugString() : "no TF_CONFIG")
            << (server != nullptr ? absl::StrCat(" serving on ", daemon.listen_address()) : "")
            << body.Describe();
  if (int rc = daemon.StartMetrics(); rc >= 0) {
    if (server != nullptr) server->Shutdown(std::chrono::system_clock::now());
    return rc;
  }

  const int exit_code = body.Run(daemon);
  daemon.StopMetrics();  // before the body tears down what the metrics' callbacks read
  {
    ShutdownDeadline deadline(options.shutdown_grace, exit_code);
    body.BeginShutdown();
    // NOT_SERVING from here on, as gRPC's health service on the main port turns when the
    // server drains; the health port closes once the work has finished.
    if (health != nullptr) health->SetServing(false);
    if (server != nullptr) {
      server->Shutdown(std::chrono::system_clock::now() + kDrainTime);
      server->Wait();
    }
    body.FinishShutdown();
    health.reset();
  }
  const StopCause cause = daemon.stop_cause();
  LogInfo() << "stopped (" << (cause == StopCause::kNone ? "job ended" : StopCauseName(cause))
            << "), exit code " << exit_code;
  return exit_code;
}

}  // namespace shardps
