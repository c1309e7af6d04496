// Daemon: what every shardps daemon (ps, worker, chief, evaluator) does the same way —
// the common flags (--tf_config, --validate_config, --bind_host, --long_lived), loading and
// checking TF_CONFIG with the promised exit codes (2 for a bad command line or config),
// serving gRPC services on the task's address (1 when the port is taken), and stopping on
// SIGINT/SIGTERM or on request (a Shutdown RPC).
//
// Usage, in main():
//   Daemon::BlockTerminationSignals();     // first, before any thread starts
//   FlagParser flags(...); Daemon daemon("ps", &flags); ...add own flags...
//   if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
//   ... daemon.Serve({service.get()}) ... daemon.WaitForStop();
//
// Thread-safety: RequestStop and the Wait* methods may be called from any thread.
#ifndef SHARDPS_RPC_DAEMON_H_
#define SHARDPS_RPC_DAEMON_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/flags.h"
#include "common/tf_config.h"
#include "grpcpp/server.h"

namespace shardps {

class Daemon {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread (and so in every thread started after),
  // and ignores SIGPIPE; a thread of the Daemon takes them with sigwait.
  static void BlockTerminationSignals();

  // Registers the common flags on `flags`. `serves`: the daemon listens (--bind_host).
  Daemon(std::string task_type, FlagParser* flags, bool serves = true);
  ~Daemon();

  // Parses the command line, handles --help and --validate_config, loads TF_CONFIG and checks
  // the task type. Returns an exit code (>= 0: return it from main) or -1 to go on.
  int Init(int argc, char** argv);

  const TfConfig& config() const { return config_; }
  bool long_lived() const { return long_lived_; }

  // Builds and starts a gRPC server with `services` on this task's port. Prints the error and
  // returns null when the address is bad or the port is taken.
  std::unique_ptr<grpc::Server> Serve(const std::vector<grpc::Service*>& services);
  // The address Serve listens on ("0.0.0.0:2222").
  const std::string& listen_address() const { return listen_; }

  // Asks the daemon to stop. A request from a Shutdown RPC (`from_rpc`) is ignored under
  // --long_lived; a signal is never ignored.
  void RequestStop(const std::string& why, bool from_rpc);
  void WaitForStop();
  bool WaitForStopWithTimeout(absl::Duration timeout);
  bool stop_requested() const;

 private:
  struct Shared;
  const std::string task_type_;
  FlagParser* const flags_;
  std::string tf_config_flag_;
  std::string bind_host_;
  bool validate_only_ = false;
  bool long_lived_ = false;
  TfConfig config_;
  std::string listen_;
  std::shared_ptr<Shared> shared_;  // also held by the signal thread
};

}  // namespace shardps

#endif  // SHARDPS_RPC_DAEMON_H_
