// Daemon: what every shardps daemon (ps, worker, chief, evaluator) does the same way: the
// common flags (--tf_config, --validate_config, --long_lived, --version, the test aid
// --test_protocol_version; --bind_host, --max_request_bytes and --health_port (a plaintext
// health-only port: rpc/health_port.h) for a daemon that serves;
// --orphan_timeout_s for one that follows a chief; the TLS flags of rpc/tls.h, for its
// servers and every channel it opens; --metrics_port, Prometheus' /metrics), TF_CONFIG, serving gRPC on the task's
// address, stopping (SIGINT/SIGTERM, a Shutdown RPC, or the chief gone too long) and the exit
// code of each stop (below; docs/exit-codes.md says what a supervisor should do with each).
//
// Usage, in main():
//   Daemon::BlockTerminationSignals();     // first, before any thread starts
//   FlagParser flags(...); Daemon daemon("ps", &flags); ...add own flags...
//   if (int rc = daemon.Init(argc, argv); rc >= 0) return rc;
//   ... return RunDaemon(daemon, body);    // rpc/daemon_run.h: serve, wait, shut down
//
// Thread-safety: Init, Serve and the setters are called from main() before the daemon is
// shared; RequestStop, NoteChiefContact, the Wait* methods and the stop accessors may be
// called from any thread.
#ifndef SHARDPS_RPC_DAEMON_H_
#define SHARDPS_RPC_DAEMON_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/data_root.h"
#include "common/flags.h"
#include "common/tf_config.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "metrics/http_server.h"
#include "metrics/registry.h"
#include "rpc/signal_watcher.h"
#include "rpc/auth.h"
#include "rpc/tls.h"

namespace shardps {

// Exit codes of every daemon (shardctl has its own: coordinator/cli/shardctl_main.cc).
// Done: the job succeeded, or a Shutdown RPC stopped the daemon at the job's end.
inline constexpr int kExitDone = 0;
// Cannot serve (port taken, no compute backend) or an unexpected failure.
inline constexpr int kExitError = 1;
// Bad command line or configuration (TF_CONFIG, flags, the job file): fix it, don't retry.
inline constexpr int kExitBadConfig = 2;
// The job failed or was cancelled (chief, evaluator).
inline constexpr int kExitJobFailed = 4;
// SIGINT or SIGTERM while a job may need the daemon (say, an eviction): restart it. A
// --long_lived daemon that holds no job when signalled (see set_idle_check) exits kExitDone.
inline constexpr int kExitInterrupted = 5;
// No contact from a chief for --orphan_timeout_s: the job is gone; do not restart.
inline constexpr int kExitOrphaned = 6;

// Why a daemon stopped.
enum class StopCause {
  kNone,      // not stopped
  kRequest,   // RequestStop: a Shutdown RPC, or the daemon's own decision
  kSignal,    // SIGINT or SIGTERM
  kOrphaned,  // --orphan_timeout_s without contact from the chief
};
// "none", "request", "signal", "orphaned".
const char* StopCauseName(StopCause cause);

// For a bad command line or configuration found before the daemon starts: prints "error: "
// and `message` to stderr as one plain line (not a log record) and returns kExitBadConfig.
int ExitBadConfig(absl::string_view message);

class Daemon {
 public:
  // Blocks SIGINT and SIGTERM in the calling thread (and so in every thread started after),
  // and ignores SIGPIPE; the Daemon's SignalWatcher takes them.
  static void BlockTerminationSignals() { SignalWatcher::BlockTerminationSignals(); }

  // Registers the common flags on `flags` (some in Init, so that a daemon may change their
  // defaults first). `serves`: the daemon listens (--bind_host, --max_request_bytes).
  Daemon(std::string task_type, FlagParser* flags, bool serves = true);
  // Stops taking signals and the orphan watch, joining their threads (not the daemon's work).
  ~Daemon();

  // Defaults of the common flags, before Init (the flag, when given, wins).
  void set_default_max_request_bytes(int64_t bytes) { max_request_bytes_ = bytes; }
  // Before Serve: the most memory gRPC's buffers for requests in flight may hold, all
  // connections together (a grpc::ResourceQuota on the server); 0 (the default): no bound.
  // gRPC 1.51 receives a message whole before it checks its size against
  // --max_request_bytes: without a quota, a 512 MiB push to a 1 MiB cap takes 512 MiB first.
  void set_request_memory_bytes(int64_t bytes) { request_memory_bytes_ = bytes; }
  void set_default_orphan_timeout_s(double seconds) { orphan_timeout_s_ = seconds; }
  // Before Init: run without TF_CONFIG when neither --tf_config nor $TF_CONFIG is given
  // (has_config() is then false). For the evaluator's sidecar mode.
  void set_config_optional() { config_optional_ = true; }

  // Names the daemon in the log (common/log.h), parses the command line (the common flags and
  // those the daemon added, each checked against the values it takes), handles --help,
  // --version and --validate_config, loads TF_CONFIG and checks the task type, then starts
  // taking signals and, when enabled, the orphan watch. Returns an exit code (>= 0: return it
  // from main) or -1 to go on.
  int Init(int argc, char** argv);

  bool has_config() const { return has_config_; }
  const TfConfig& config() const { return config_; }
  bool long_lived() const { return long_lived_; }
  // ZeroDuration when the orphan watch is off (a chief, --orphan_timeout_s=0, --long_lived).
  absl::Duration orphan_timeout() const;
  int64_t max_request_bytes() const { return max_request_bytes_; }
  // --health_port: where RunDaemon answers plaintext health checks (0: nowhere), on the host
  // the daemon listens on (rpc/health_port.h); and --bind_host ("" when not given).
  int64_t health_port() const { return health_port_; }
  const std::string& bind_host() const { return bind_host_; }

  // shardps' server settings (rpc/grpc_util.h) with requests capped at `max_request_bytes`
  // (0: no cap) and their buffers at `request_memory_bytes` (0: no bound): what Serve
  // applies.
  static void ConfigureBuilder(grpc::ServerBuilder* builder, int64_t max_request_bytes,
                               int64_t request_memory_bytes = 0);

  // Builds and starts a gRPC server with `services` on this task's port, requests capped at
  // max_request_bytes() (by default 16 MiB for the ps, 4 MiB for the others): gRPC refuses a
  // larger message from its length with RESOURCE_EXHAUSTED ("Received message larger than max
  // (N vs. LIMIT)"), before the service sees it. Logs the error and returns null when the
  // address is bad or the port is taken (exit kExitError).
  std::unique_ptr<grpc::Server> Serve(const std::vector<grpc::Service*>& services);
  // The same on `address` ("host:port", read as a TF_CONFIG address is: see ListenAddress)
  // instead of this task's TF_CONFIG address. Every server answers gRPC's standard health
  // check; with no `services` that is all it serves (the evaluator's).
  std::unique_ptr<grpc::Server> ServeAt(const std::string& address,
                                        const std::vector<grpc::Service*>& services);
  // What to exit with when Serve or ServeAt returned null: kExitBadConfig when the binding
  // rule refused the address (plaintext beyond loopback without --insecure), else kExitError.
  int serve_exit_code() const { return serve_exit_code_; }
  // The address Serve listens on ("0.0.0.0:2222"), with the port it bound.
  const std::string& listen_address() const { return listen_; }
  // The port Serve bound (TF_CONFIG's, or the kernel's choice when that is 0).
  int bound_port() const { return bound_port_; }
  // --data_root, opened (unconfined without the flag).
  const DataRoot& data_root() const { return data_root_; }
  // The TLS flags as parsed (also the process's: SetProcessTls, in Init).
  const TlsOptions& tls() const { return tls_; }

  // The daemon's Prometheus metrics: register families before StartMetrics (a callback
  // family's callback must stay valid until StopMetrics).
  metrics::Registry* metrics() { return &metrics_; }
  // With --metrics_port (0: off), serves metrics() at /metrics on that port, on the host the
  // daemon's gRPC server listens on (or would: TF_CONFIG's and --bind_host's rule), with the
  // daemon's TLS certificate and client-certificate rule; the binding rule applies to it as
  // to gRPC. Adds shardps_certificate_expiry_seconds for the TLS files. Returns an exit code
  // (kExitBadConfig: the binding rule refused; kExitError: the port is taken) or -1 to go on.
  // RunDaemon calls it once the gRPC server runs, and StopMetrics before the body shuts down.
  int StartMetrics();
  void StopMetrics() { metrics_server_.reset(); }
  // Whether --metrics_port asks for metrics (a daemon may skip counting without it).
  bool metrics_enabled() const { return metrics_port_flag_ > 0; }
  // The port /metrics is served on (0: not served).
  int metrics_port() const { return metrics_server_ ? metrics_server_->port() : 0; }

  // Before the daemon stops: tells whether it holds no job (a ps with no shards, a worker
  // that runs none). A --long_lived daemon stopped by a signal while idle exits kExitDone:
  // nothing needs it back. Without --long_lived a daemon exists for one job, which has not
  // ended while it runs (the chief's Shutdown would have stopped it), so a signal always
  // means kExitInterrupted: exiting 0 would make a Kubernetes Job count an evicted ps as
  // completed and never replace it.
  void set_idle_check(std::function<bool()> idle) { idle_check_ = std::move(idle); }

  // Notes contact from the chief: the orphan clock starts over. Lock-free; call it on every
  // contact (the chief's RPCs to a worker, its Health probes to a ps, the status it answers
  // the evaluator). A ps, worker or evaluator stops with kExitOrphaned after
  // --orphan_timeout_s (an hour by default) without one, counted from its start until the
  // first contact; 0 or --long_lived turns the watch off.
  void NoteChiefContact();

  // Asks the daemon to stop (cause kRequest). A request from a Shutdown RPC (`from_rpc`) is
  // ignored under --long_lived. The first cause to stop a daemon is the one it keeps.
  void RequestStop(const std::string& why, bool from_rpc);
  void WaitForStop();
  // True once stopped; false when `timeout` passed first.
  bool WaitForStopWithTimeout(absl::Duration timeout);
  bool stop_requested() const;
  StopCause stop_cause() const;
  // The exit code of the stop: kRequest (or not stopped) kExitDone, kSignal kExitInterrupted
  // (kExitDone for an idle --long_lived daemon: set_idle_check), kOrphaned kExitOrphaned.
  // Call it right after the stop, before the daemon tears down what the idle check reads. A
  // chief or evaluator that knows its job's outcome returns that instead (kExitJobFailed).
  int StopExitCode() const;

 private:
  struct Shared;
  void StartOrphanWatch();

  const std::string task_type_;
  FlagParser* const flags_;
  const bool serves_;
  const bool follows_chief_;
  std::string tf_config_flag_;
  std::string bind_host_;
  bool validate_only_ = false;
  bool print_version_ = false;
  std::string test_protocol_version_;
  TlsOptions tls_;
  AuthOptions auth_;
  int64_t metrics_port_flag_ = 0;
  metrics::Registry metrics_;
  std::unique_ptr<metrics::HttpServer> metrics_server_;
  std::string data_root_flag_;
  std::string dataset_roots_flag_;
  DataRoot data_root_;
  int serve_exit_code_ = kExitError;
  bool long_lived_ = false;
  bool config_optional_ = false;
  bool has_config_ = false;
  int64_t max_request_bytes_;
  int64_t health_port_ = 0;
  int64_t request_memory_bytes_ = 0;
  double orphan_timeout_s_ = 3600;
  TfConfig config_;
  std::string listen_;
  int bound_port_ = 0;
  std::function<bool()> idle_check_;
  std::unique_ptr<grpc::Service> health_only_;  // ServeAt without services: the health service
  std::unique_ptr<Shared> shared_;  // read by the signal watcher and the orphan watch
  std::unique_ptr<SignalWatcher> signals_;
  std::thread orphan_watch_;
};

}  // namespace shardps

#endif  // SHARDPS_RPC_DAEMON_H_
