#include "rpc/daemon.h"

#include <string.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <limits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "common/daemon_config.h"
#include "common/log.h"
#include "common/process_tuning.h"
#include "common/protocol_version.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "rpc/grpc_util.h"
#include "rpc/health_service.h"
#include "rpc/metrics_endpoint.h"
#include "rpc/orphan_clock.h"

namespace shardps {

static_assert(kExitBadConfig == kConfigInvalid, "one code for a bad configuration");

namespace {

// Default --max_request_bytes: the ps takes the client library's chunks
// (PsClient::Options::max_chunk_bytes, 4 MiB) and their framing; the other daemons take small
// control messages only.
constexpr int64_t kPsMaxRequestBytes = 16 << 20;
constexpr int64_t kControlMaxRequestBytes = 4 << 20;

}  // namespace

const char* StopCauseName(StopCause cause) {
  switch (cause) {
    case StopCause::kNone:
      return "none";
    case StopCause::kRequest:
      return "request";
    case StopCause::kSignal:
      return "signal";
    case StopCause::kOrphaned:
      return "orphaned";
  }
  return "unknown";
}

int ExitBadConfig(absl::string_view message) {
  std::cerr << "error: " << message << "\n";
  return kExitBadConfig;
}

// The stop state, shared with the orphan watch.
struct Daemon::Shared {
  absl::Mutex mu;
  StopCause cause ABSL_GUARDED_BY(mu) = StopCause::kNone;
  bool closing ABSL_GUARDED_BY(mu) = false;  // the Daemon is being destroyed
  // Replaced in Init, before any thread reads it; read-only (its atomics aside) after.
  std::unique_ptr<OrphanClock> orphan =
      std::make_unique<OrphanClock>(absl::ZeroDuration(), OrphanClock::MonotonicNow());

  // The first cause wins. Returns whether it was this one.
  bool Stop(StopCause c) {
    absl::MutexLock lock(&mu);
    if (cause != StopCause::kNone) return false;
    cause = c;
    return true;
  }
  bool stopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return cause != StopCause::kNone; }
};

Daemon::Daemon(std::string task_type, FlagParser* flags, bool serves)
    : task_type_(std::move(task_type)),
      flags_(flags),
      serves_(serves),
      follows_chief_(task_type_ != "chief"),
      max_request_bytes_(task_type_ == "ps" ? kPsMaxRequestBytes : kControlMaxRequestBytes),
      shared_(std::make_unique<Shared>()) {
  flags_->AddString("tf_config", &tf_config_flag_,
                    "cluster config: inline JSON or a file path (default: $TF_CONFIG)");
  flags_->AddBool("validate_config", &validate_only_,
                  "only validate the configuration: print the task and address, exit 0 or 2");
  flags_->AddBool("long_lived", &long_lived_,
                  serves_ ? "keep serving after a job ends (ignore Shutdown requests; no orphan "
                            "timeout)"
                          : "keep running after a job ends (no orphan timeout)");
  flags_->AddBool("version", &print_version_, "print the wire protocol version and exit");
  flags_->AddString("test_protocol_version", &test_protocol_version_,
                    "test aid: claim this wire protocol version (\"MIN-CURRENT\" or "
                    "\"CURRENT\") instead of the build's, as a daemon of another release would",
                    [](const std::string& value) { return ParseProtocolHeader(value).status(); });
  tls_.AddFlags(flags_);
  auth_.AddFlags(flags_, serves_);
  flags_->AddInt("metrics_port", &metrics_port_flag_,
                 "serve Prometheus metrics at /metrics on this port, with the daemon's TLS "
                 "(0: off)",
                 {0, 65535});
  flags_->AddString("data_root", &data_root_flag_,
                    "the directory tree this daemon's files (checkpoints, snapshots, the job "
                    "files' paths) must lie in; a request or job naming a path outside it is "
                    "refused (default: unconfined)");
  flags_->AddString("dataset_roots", &dataset_roots_flag_,
                    "with --data_root: comma-separated directories a job's data_dir may also "
                    "lie in, read only (default: /usr/share/datasets where it exists)");
  if (serves_) {
    flags_->AddString("bind_host", &bind_host_,
                      "host to listen on (default: TF_CONFIG's host when it is a loopback "
                      "IP, else all interfaces; the port is TF_CONFIG's)");
    flags_->AddInt("health_port", &health_port_,
                   "also answer gRPC's health check, and nothing else, in plaintext on this "
                   "port (for Kubernetes' gRPC probes, which cannot speak TLS); 0: off",
                   {0, 65535});
  }
}

Daemon::~Daemon() {
  signals_.reset();
  {
    absl::MutexLock lock(&shared_->mu);
    shared_->closing = true;
  }
  if (orphan_watch_.joinable()) orphan_watch_.join();
}

absl::Duration Daemon::orphan_timeout() const { return shared_->orphan->timeout(); }

int Daemon::Init(int argc, char** argv) {
  SetLogDaemon(task_type_);
  TuneMallocForBulkTransfers();
  DisableMutexDeadlockDetection();
  // Registered here, so that the defaults a daemon set since construction are the ones
  // --help shows.
  if (serves_) {
    flags_->AddInt("max_request_bytes", &max_request_bytes_,
                   "largest request message accepted (larger ones fail RESOURCE_EXHAUSTED); "
                   "0: no limit",
                   {0, std::numeric_limits<int>::max()});
  }
  if (follows_chief_) {
    flags_->AddDouble("orphan_timeout_s", &orphan_timeout_s_,
                      "stop with exit code 6 after this long without contact from the chief "
                      "(0: never)",
                      DoubleRange::AtLeast(0));
  }
  int rc = HandleParseResult(*flags_, flags_->Parse(argc, argv));
  if (rc >= 0) return rc;
  if (!test_protocol_version_.empty()) {
    SetLocalProtocolForTesting(*ParseProtocolHeader(test_protocol_version_));  // checked
  }
  if (print_version_) {
    std::cout << "shardps " << task_type_ << ": wire " << DescribeProtocol(LocalProtocol())
              << "\n";
    return kExitDone;
  }
  if (absl::Status tls = tls_.Validate(); !tls.ok()) return ExitBadConfig(tls.message());
  SetProcessTls(tls_);
  if (absl::Status auth = SetProcessAuth(auth_, tls_); !auth.ok()) {
    return ExitBadConfig(auth.message());
  }
  absl::StatusOr<DataRoot> data_root = DataRoot::Open(data_root_flag_, "data_root");
  if (!data_root.ok()) return ExitBadConfig(data_root.status().message());
  data_root_ = *std::move(data_root);
  const bool dataset_roots_given = !dataset_roots_flag_.empty();
  if (absl::Status s = data_root_.AddDatasetRoots(
          dataset_roots_given ? dataset_roots_flag_ : std::string(kDefaultDatasetRoots),
          "dataset_roots", dataset_roots_given);
      !s.ok()) {
    return ExitBadConfig(s.message());
  }
  const char* env = std::getenv("TF_CONFIG");
  if (validate_only_) {
    return ValidateConfigMain(LoadTfConfig(tf_config_flag_, env), task_type_, std::cout, std::cerr);
  }
  if (config_optional_ && tf_config_flag_.empty() && (env == nullptr || env[0] == '\0')) {
    has_config_ = false;
  } else {
    absl::StatusOr<TfConfig> config = LoadDaemonConfig(tf_config_flag_, env, task_type_);
    if (!config.ok()) return ExitBadConfig(config.status().message());
    config_ = *std::move(config);
    has_config_ = true;
  }

  absl::StatusOr<std::unique_ptr<SignalWatcher>> signals =
      SignalWatcher::Start([shared = shared_.get()](int sig) {
        LogInfo() << "signal " << sig << " (" << strsignal(sig) << "), stopping";
        shared->Stop(StopCause::kSignal);
      });
  if (!signals.ok()) {
    LogError() << "cannot take signals: " << signals.status().message();
    return kExitError;
  }
  signals_ = *std::move(signals);

  if (follows_chief_ && !long_lived_ && orphan_timeout_s_ > 0) {
    shared_->orphan = std::make_unique<OrphanClock>(absl::Seconds(orphan_timeout_s_),
                                                    OrphanClock::MonotonicNow());
    StartOrphanWatch();
  }
  return -1;
}

void Daemon::StartOrphanWatch() {
  orphan_watch_ = std::thread([shared = shared_.get()] {
    const OrphanClock& clock = *shared->orphan;
    absl::MutexLock lock(&shared->mu);
    auto done = [shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) {
      return shared->stopped() || shared->closing;
    };
    while (!done()) {
      const absl::Duration now = OrphanClock::MonotonicNow();
      if (clock.Expired(now)) {
        const double timeout_s = absl::ToDoubleSeconds(clock.timeout());
        LogInfo() << "no contact from the chief "
                  << (clock.contacted()
                          ? absl::StrCat("for ", absl::ToDoubleSeconds(now - clock.last_contact()),
                                         " s")
                          : absl::StrCat("since start, ", timeout_s, " s ago"))
                  << " (--orphan_timeout_s=" << timeout_s
                  << "): the job is gone; stopping with exit code " << kExitOrphaned;
        shared->cause = StopCause::kOrphaned;
        return;
      }
      // Contacts do not wake this thread: after the wait it looks at the clock again.
      shared->mu.AwaitWithTimeout(absl::Condition(&done), clock.Deadline() - now);
    }
  });
}

void Daemon::ConfigureBuilder(grpc::ServerBuilder* builder, int64_t max_request_bytes,
                              int64_t request_memory_bytes) {
  ConfigureServerBuilder(builder);
  if (max_request_bytes > 0) {
    builder->SetMaxReceiveMessageSize(
        static_cast<int>(std::min<int64_t>(max_request_bytes, std::numeric_limits<int>::max())));
  }
  if (request_memory_bytes > 0) {
    // Past it, gRPC shrinks its read buffers and flow-control windows and cancels streams
    // (RESOURCE_EXHAUSTED) rather than buffer more.
    grpc::ResourceQuota quota("shardps server requests");
    quota.Resize(static_cast<size_t>(request_memory_bytes));
    builder->SetResourceQuota(quota);
  }
}

int Daemon::StartMetrics() {
  if (metrics_port_flag_ == 0) return -1;
  std::string host_of = listen_;
  if (host_of.empty()) {
    absl::StatusOr<std::string> listen =
        ListenAddress(has_config_ ? config_.TaskAddress() : "127.0.0.1:0", bind_host_);
    if (!listen.ok()) return ExitBadConfig(listen.status().message());
    host_of = *listen;
  }
  const std::string host = host_of.substr(0, host_of.rfind(':'));
  absl::StatusOr<std::unique_ptr<metrics::HttpServer>> server =
      ServeMetrics(&metrics_, host, static_cast<int>(metrics_port_flag_), tls_);
  if (absl::IsInvalidArgument(server.status())) {
    return ExitBadConfig(absl::StrCat("--metrics_port: ", server.status().message()));
  }
  if (!server.ok()) {
    LogError() << server.status().message();
    return kExitError;
  }
  metrics_server_ = *std::move(server);
  LogInfo() << "metrics on " << MetricsUrl(host, *metrics_server_, tls_);
  return -1;
}

std::unique_ptr<grpc::Server> Daemon::Serve(const std::vector<grpc::Service*>& services) {
  if (!has_config_) {
    LogError() << "no TF_CONFIG: nothing to listen on";
    return nullptr;
  }
  return ServeAt(config_.TaskAddress(), services);
}

std::unique_ptr<grpc::Server> Daemon::ServeAt(const std::string& address,
                                              const std::vector<grpc::Service*>& services) {
  absl::StatusOr<std::string> listen = ListenAddress(address, bind_host_);
  if (!listen.ok()) {
    LogError() << listen.status().message();
    return nullptr;
  }
  listen_ = *listen;
  // The binding rule, by the address actually bound (docs/security.md).
  if (absl::Status binding = CheckBinding(listen_, tls_); !binding.ok()) {
    LogError() << binding.message();
    serve_exit_code_ = kExitBadConfig;
    return nullptr;
  }
  // gRPC's standard health service (grpc.health.v1.Health, proto/health.proto): the server
  // as a whole ("") answers SERVING while it runs, for Kubernetes' gRPC probes.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  ConfigureBuilder(&builder, max_request_bytes_, request_memory_bytes_);
  builder.AddListeningPort(listen_, ServerCredentialsFor(tls_), &bound_port_);
  LogInfo() << "TLS on " << listen_ << ": "
            << (!tls_.can_serve()       ? "off (plaintext)"
                : tls_.client_auth      ? "on, client certificates of the CA required"
                                        : "on")
            << (tls_.enabled() ? absl::StrCat("; CA ", tls_.ca_file) : "") << "; "
            << DescribeProcessAuth() << "; files "
            << (data_root_.confined()
                    ? absl::StrCat("confined to ", data_root_.path(), " (datasets also in [",
                                   absl::StrJoin(data_root_.dataset_roots(), ", "), "])")
                    : std::string("unconfined (no --data_root)"));
  for (grpc::Service* service : services) builder.RegisterService(service);
  // gRPC's built-in health service runs on a server's own services; a server with none (the
  // evaluator's, which listens only for health checks) gets a synchronous one of its own.
  if (services.empty()) {
    health_only_ = std::make_unique<HealthOnlyService>();
    builder.RegisterService(health_only_.get());
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port_ == 0) {
    LogError() << "cannot listen on " << listen_ << " (port in use?)";
    return nullptr;
  }
  listen_ = absl::StrCat(listen_.substr(0, listen_.rfind(':')), ":", bound_port_);  // for port 0
  return server;
}

void Daemon::NoteChiefContact() { shared_->orphan->NoteContact(OrphanClock::MonotonicNow()); }

void Daemon::RequestStop(const std::string& why, bool from_rpc) {
  bool ignored = from_rpc && long_lived_;
  LogInfo() << "stop requested" << (why.empty() ? "" : ": ") << why
            << (ignored ? " (ignored: --long_lived)" : "");
  if (!ignored) shared_->Stop(StopCause::kRequest);
}

void Daemon::WaitForStop() {
  absl::MutexLock lock(&shared_->mu);
  Shared* shared = shared_.get();
  auto stopped = [shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) { return shared->stopped(); };
  shared_->mu.Await(absl::Condition(&stopped));
}

bool Daemon::WaitForStopWithTimeout(absl::Duration timeout) {
  absl::MutexLock lock(&shared_->mu);
  Shared* shared = shared_.get();
  auto stopped = [shared]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(shared->mu) { return shared->stopped(); };
  return shared_->mu.AwaitWithTimeout(absl::Condition(&stopped), timeout);
}

bool Daemon::stop_requested() const { return stop_cause() != StopCause::kNone; }

StopCause Daemon::stop_cause() const {
  absl::MutexLock lock(&shared_->mu);
  return shared_->cause;
}

int Daemon::StopExitCode() const {
  switch (stop_cause()) {
    case StopCause::kNone:
    case StopCause::kRequest:
      return kExitDone;
    case StopCause::kSignal:
      return long_lived_ && idle_check_ && idle_check_() ? kExitDone : kExitInterrupted;
    case StopCause::kOrphaned:
      return kExitOrphaned;
  }
  return kExitError;
}

}  // namespace shardps
