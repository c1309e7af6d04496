#include "rpc/daemon_run.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/log.h"

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
    if (server != nullptr) {
      server->Shutdown(std::chrono::system_clock::now() + kDrainTime);
      server->Wait();
    }
    body.FinishShutdown();
  }
  const StopCause cause = daemon.stop_cause();
  LogInfo() << "stopped (" << (cause == StopCause::kNone ? "job ended" : StopCauseName(cause))
            << "), exit code " << exit_code;
  return exit_code;
}

}  // namespace shardps
