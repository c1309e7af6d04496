// RunDaemon: a daemon's life after Daemon::Init, the same for every daemon: serve, run the
// daemon's work (a DaemonBody) until the job ends or the daemon stops, shut down in one order.
//
// Usage, in main() after Daemon::Init:
//   PsDaemonBody body(...);            // a DaemonBody: owns what the services use
//   return RunDaemon(daemon, body);
//
// Thread-safety: RunDaemon runs on main()'s thread; the body's methods are called on it, one
// at a time, in the order RunDaemon states.
#ifndef SHARDPS_RPC_DAEMON_RUN_H_
#define SHARDPS_RPC_DAEMON_RUN_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "rpc/daemon.h"

namespace shardps {

// What differs from one daemon to the next; RunDaemon calls it.
class DaemonBody {
 public:
  virtual ~DaemonBody() = default;

  // The services the server registers. None: it answers only gRPC's health check.
  virtual std::vector<grpc::Service*> Services() { return {}; }
  // Appended to the line that says where the daemon serves (", backend cpu").
  virtual std::string Describe() const { return ""; }
  // The daemon's work, while the server runs. Returns the exit code once the job ended or
  // the daemon stopped. The default waits for the stop and returns daemon.StopExitCode().
  virtual int Run(Daemon& daemon);
  // After Run: end what a call in flight may wait on, so that the server can drain.
  virtual void BeginShutdown() {}
  // After the server drained: finish what its calls scheduled.
  virtual void FinishShutdown() {}
};

struct RunOptions {
  enum class Listen {
    kTaskAddress,  // TF_CONFIG's address of this task (Daemon::Serve)
    kAddress,      // `address` (Daemon::ServeAt)
    kNone,         // no server
  };
  Listen listen = Listen::kTaskAddress;
  std::string address;
  // Past this after Run returned, the process exits with Run's exit code (std::_Exit), even
  // if a call has not drained.
  absl::Duration shutdown_grace = absl::InfiniteDuration();
};

// Serves the body's services, and with --health_port the plaintext health port
// (rpc/health_port.h), logs where ("<task> serving on <address><Describe()>"), calls
// body.Run until the job ends or the daemon stops (a signal, a Shutdown RPC, the orphan
// timeout), then shuts down in this order:
//   1. BeginShutdown: the work fails what a call in flight may wait on (a ps's waiting pulls);
//   2. the server takes no new calls and drains those in flight (2 s, then cancels them);
//      the health port answers NOT_SERVING from here on;
//   3. FinishShutdown: the work finishes what the calls scheduled (an executor's queue); then
//      the health port closes;
//   4. a last log line: "stopped (<cause>), exit code N".
// Past options.shutdown_grace (a step stuck on a ps that is gone, say) the process exits at
// once with the exit code. Returns the daemon's exit code: Run's, or kExitError when it cannot
// listen (logged).
int RunDaemon(Daemon& daemon, DaemonBody& body, const RunOptions& options = {});

}  // namespace shardps

#endif  // SHARDPS_RPC_DAEMON_RUN_H_
