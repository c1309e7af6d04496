// transport_bench: how close shardps' data path comes to what this machine's loopback and a
// bare gRPC unary call can do, measured in one run.
//
//   bazel run //bench:transport_bench -- [--json] [--quick] [--tls=off|on|both]
//
// 1. Baselines: iperf3's single-stream loopback TCP goodput (run twice, before and after
//    the dense transfers; the better run is the machine's limit); a bare gRPC echo service
//    (bench/echo.proto, served by this binary re-executed as a second process): the p50/p99
//    of a 4-byte round trip and unary goodput of 16 and 64 MiB `bytes` payloads. The 4-byte
//    round trips are sampled in alternating blocks with shardps' 4-byte pulls, so that both
//    see the same machine: on this shared VM a round trip takes 1.5-2x longer when the cores
//    are idle (deeper sleep) than when they are busy, which swamps the difference measured.
// 2. shardps: two real ps daemons and one PsClient: dense Pull/Push of 1, 16 and 64 MiB
//    variables (one shard on each ps), the latency of a 4-byte pull, PullRows/PushRows of
//    65 536 random ids at 64 and 1 floats per row (at 64 floats the payload is 16 MiB, and
//    its goodput is compared with the dense 16 MiB transfer's: the target is at least 0.8),
//    PullRows/PushRows of Zipf(1.1) batches over 10^6 rows deduplicated by the caller
//    (unique rows/s and the dedup ratio), and Adam vs NOOP pushes at 16 MiB.
// 3. Each figure as a ratio to its baseline, beside the target from the issue, met or not.
//
// 4. --tls: `off` (the default) runs all of the above over plaintext; `on` runs it against
//    ps daemons serving mutual TLS, roles on (the client's certificate names
//    spiffe://shardps/chief/0; ECDSA P-256 certificates made with openssl for this run);
//    `both` starts a plaintext and a mutual-TLS cluster side by side and measures the dense
//    section and the 4-byte pull on both, their repetitions alternating so that both see the
//    same machine, then prints per size goodput off, on and on/off against issue 23's target
//    (>= 0.7 at 16 and 64 MiB); rows and optimizer figures are taken on the plaintext cluster
//    only. The bare gRPC baseline stays plaintext in every mode. With TLS, `openssl speed -evp
//    aes-128-gcm` (one process, then -multi 2) runs first: its 16 KiB-block throughput is
//    the cipher's limit on one core, printed beside each TLS goodput (skipped, with a
//    message, when openssl is missing).
//
// Every figure is the median of several timed repetitions after warm-up. The table goes to
// stdout; with --json it goes to stderr and stdout carries one JSON object. The "cores"
// column is CPU-seconds used by the client and the server processes per wall-second of the
// operation: how many cores were busy (the machine's ceiling is its core count). "vs gRPC" is
// a dense transfer's goodput over the same-size bare gRPC unary call's. A last line gives the
// host's load and the CPU other processes used during the run (bench/host_stats.h).
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/distributions.h"
#include "absl/random/random.h"
#include "absl/random/zipf_distribution.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/notification.h"
#include "bench/echo.grpc.pb.h"
#include "bench/host_stats.h"
#include "bench/stats.h"
#include "client/ps_client.h"
#include "common/flags.h"
#include "common/process_tuning.h"
#include "common/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "math/unique_ids.h"
#include "nlohmann/json.hpp"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "rpc/tls.h"
#include "tests/process.h"
#include "tests/ps_cluster.h"

namespace shardps {
namespace bench {
namespace {

using testing::Process;
using testing::PsCluster;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Config {
  bool json = false;
  bool quick = false;
  int64_t max_chunk_bytes = 0;     // 0: PsClient::Options' default
  int64_t connections_per_ps = 0;  // 0: NewGrpcPsClient's default
  int64_t calls_in_flight_per_ps = -1;  // -1: PsClient::Options' default
  int warmup = 2;
  int reps = 10;
  int latency_samples = 3000;
  std::string tls = "off";  // off, on, both
  // The ps serve Prometheus /metrics on this port (0: off): the data path's counting on.
  int64_t ps_metrics_port = 0;
  // More flags for each ps daemon (--ps_flags, comma-separated).
  std::vector<std::string> extra_ps_flags;
  int64_t openssl_seconds = 2;  // openssl speed's -seconds; 0: not run
  bool tls_both() const { return tls == "both"; }
  bool tls_any() const { return tls != "off"; }
  // Sections to measure (iperf3, grpc, dense, small, rows, optimizer); empty: all. Figures
  // whose baseline was skipped show no ratio.
  std::vector<std::string> only;
  bool Wants(const std::string& section) const {
    return only.empty() || std::find(only.begin(), only.end(), section) != only.end();
  }
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Wall time and the CPU time of a set of processes over a measured operation.
class CpuMeter {
 public:
  explicit CpuMeter(std::vector<pid_t> pids) : pids_(std::move(pids)) {}
  double Total() const {
    double s = 0;
    for (pid_t p : pids_) s += SchedulerCpuSeconds(p);
    return s;
  }

 private:
  std::vector<pid_t> pids_;
};

// Median seconds per call of `fn` over `reps` timed calls after `warmup` untimed ones, and
// the CPU-seconds per wall-second that the metered processes used meanwhile.
struct Timing {
  double median_s = kNaN;
  double p50_s = kNaN;
  double p99_s = kNaN;
  double cpu_per_wall = kNaN;
};

Timing Summarize(const std::vector<double>& samples) {
  Timing t;
  t.median_s = Median(samples);
  t.p50_s = Percentile(samples, 0.5);
  t.p99_s = Percentile(samples, 0.99);
  return t;
}

absl::StatusOr<Timing> TimeCalls(int warmup, int reps, const CpuMeter& meter,
                                 const std::function<absl::Status()>& fn) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(fn());
  std::vector<double> samples;
  samples.reserve(reps);
  const double cpu0 = meter.Total();
  const double wall0 = Now();
  for (int i = 0; i < reps; ++i) {
    const double t0 = Now();
    RETURN_IF_ERROR(fn());
    samples.push_back(Now() - t0);
  }
  const double wall = Now() - wall0;
  Timing t;
  t.cpu_per_wall = wall > 0 ? (meter.Total() - cpu0) / wall : kNaN;
  t.median_s = Median(samples);
  t.p50_s = Percentile(samples, 0.5);
  t.p99_s = Percentile(samples, 0.99);
  return t;
}

// ---------------------------------------------------------------------------------------
// Report

struct Figure {
  std::string section;
  std::string key;    // JSON key
  std::string label;  // table label
  double value = kNaN;
  std::string unit;
  double bytes_per_s = kNaN;  // goodput figures: also shown in Gbit/s
  double rows_per_s = kNaN;
  double ratio = kNaN;  // to `ratio_of`
  std::string ratio_of;
  double grpc_ratio = kNaN;  // goodput figures: to the same transfer over bare gRPC
  std::string target_op;     // ">=" or "<=", empty: no target
  double target = kNaN;
  double cpu_per_wall = kNaN;

  bool has_target() const { return !target_op.empty(); }
  bool met() const {
    if (!has_target() || std::isnan(ratio)) return false;
    return target_op == ">=" ? ratio >= target : ratio <= target;
  }
};

double MiBps(double bytes_per_s) { return bytes_per_s / kMiB; }
double Gbps(double bytes_per_s) { return bytes_per_s * 8 / 1e9; }

std::string Num(double v, const char* fmt = "%.3g") {
  if (std::isnan(v)) return "-";
  // printf, not absl::StrFormat: the format is chosen at run time, which clang's
  // absl::StrFormat refuses (it checks formats at compile time).
  char text[64];
  std::snprintf(text, sizeof(text), fmt, v);
  return text;
}

void PrintTable(std::ostream& out, const std::vector<Figure>& figures, const Config& config) {
  std::string section;
  const std::string header = absl::StrFormat("%-34s %12s %-6s %8s %7s %-20s %7s %-8s %7s %5s",
                                             "figure", "value", "unit", "Gbit/s", "ratio",
                                             "(of)", "target", "met", "vs gRPC", "cores");
  out << header << "\n" << std::string(header.size(), '-') << "\n";
  for (const Figure& f : figures) {
    if (f.section != section) {
      section = f.section;
      out << "[" << section << "]\n";
    }
    std::string target = f.has_target() ? absl::StrCat(f.target_op, Num(f.target, "%.2g")) : "";
    std::string met = f.has_target() ? (f.met() ? "met" : "NOT MET") : "";
    out << absl::StrFormat("%-34s %12s %-6s %8s %7s %-20s %7s %-8s %7s %5s\n", f.label,
                           Num(f.value, f.value >= 1e5 ? "%.4g" : "%.1f"), f.unit,
                           Num(Gbps(f.bytes_per_s), "%.2f"), Num(f.ratio, "%.2f"),
                           std::isnan(f.ratio) ? "" : absl::StrCat("(", f.ratio_of, ")"),
                           target, met, Num(f.grpc_ratio, "%.2f"),
                           Num(f.cpu_per_wall, "%.2f"));
  }
  int met = 0, total = 0;
  for (const Figure& f : figures) {
    if (!f.has_target()) continue;
    ++total;
    if (f.met()) ++met;
  }
  out << absl::StrFormat("targets met: %d of %d   (%s; %d cores; median of %d reps after %d "
                         "warm-up)\n",
                         met, total, config.quick ? "quick run" : "full run", OnlineCores(),
                         config.reps, config.warmup);
}

nlohmann::json JsonNumber(double v) {
  if (std::isnan(v)) return nullptr;
  return v;
}

nlohmann::json ToJson(const std::vector<Figure>& figures, const Config& config) {
  nlohmann::json out;
  out["config"] = {{"quick", config.quick},
                   {"warmup", config.warmup},
                   {"reps", config.reps},
                   {"latency_samples", config.latency_samples},
                   {"max_chunk_bytes", config.max_chunk_bytes},
                   {"connections_per_ps", config.connections_per_ps},
                   {"calls_in_flight_per_ps", config.calls_in_flight_per_ps},
                   {"tls", config.tls},
                   {"cores", OnlineCores()}};
  nlohmann::json list = nlohmann::json::array();
  int met = 0, total = 0;
  for (const Figure& f : figures) {
    nlohmann::json j;
    j["key"] = f.key;
    j["section"] = f.section;
    j["label"] = f.label;
    j["value"] = JsonNumber(f.value);
    j["unit"] = f.unit;
    if (!std::isnan(f.bytes_per_s)) {
      j["mib_per_s"] = MiBps(f.bytes_per_s);
      j["gbit_per_s"] = Gbps(f.bytes_per_s);
    }
    if (!std::isnan(f.rows_per_s)) j["rows_per_s"] = f.rows_per_s;
    if (!std::isnan(f.ratio)) {
      j["ratio"] = f.ratio;
      j["ratio_of"] = f.ratio_of;
    }
    if (!std::isnan(f.grpc_ratio)) j["ratio_to_bare_grpc"] = f.grpc_ratio;
    if (f.has_target()) {
      j["target"] = absl::StrCat(f.target_op, " ", f.target);
      j["met"] = f.met();
      ++total;
      if (f.met()) ++met;
    }
    j["cpu_per_wall"] = JsonNumber(f.cpu_per_wall);
    list.push_back(std::move(j));
  }
  out["figures"] = std::move(list);
  out["targets_met"] = met;
  out["targets_total"] = total;
  return out;
}

// ---------------------------------------------------------------------------------------
// Baseline 1: iperf3

std::string FindInPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::vector<std::string> dirs =
      absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty());
  dirs.push_back("/usr/bin");
  dirs.push_back("/usr/local/bin");
  for (const std::string& dir : dirs) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// Single-stream loopback TCP goodput in bytes per second, from iperf3's receiver side.
absl::StatusOr<double> MeasureIperf3(const std::string& iperf3, int seconds) {
  const int port = testing::PickFreePort();
  const std::string dir = testing::TempDir();
  ASSIGN_OR_RETURN(std::unique_ptr<Process> server,
                   Process::Start(iperf3, {"-s", "-1", "-p", absl::StrCat(port)}, {},
                                  absl::StrCat(dir, "/iperf3_server.log")));
  // The one-off server accepts exactly one client, so it is not probed: the client retries
  // while the server is still starting.
  std::string output;
  int code = -1;
  for (int attempt = 0; attempt < 50 && code != 0; ++attempt) {
    absl::SleepFor(absl::Milliseconds(100));
    ASSIGN_OR_RETURN(code, testing::RunCommand(
                               iperf3,
                               {"-c", "127.0.0.1", "-p", absl::StrCat(port), "-l", "1M", "-t",
                                absl::StrCat(seconds), "-J"},
                               {}, &output, absl::Seconds(seconds + 30)));
    if (!server->Running()) break;
  }
  if (code != 0) {
    return absl::InternalError(absl::StrCat("iperf3 client exited with ", code, ":\n", output,
                                            "\nserver:\n", server->Log()));
  }
  // stdout and stderr share the log: the JSON report is the outermost {...}.
  const size_t open = output.find('{');
  const size_t close = output.rfind('}');
  if (open == std::string::npos || close == std::string::npos || close < open) {
    return absl::InternalError(absl::StrCat("iperf3 printed no JSON report:\n", output));
  }
  nlohmann::json report = nlohmann::json::parse(output.substr(open, close - open + 1), nullptr,
                                                /*allow_exceptions=*/false);
  if (report.is_discarded()) {
    return absl::InternalError(absl::StrCat("iperf3's JSON report does not parse:\n", output));
  }
  const nlohmann::json* node = &report;
  for (const char* key : {"end", "sum_received", "bits_per_second"}) {
    if (!node->is_object() || !node->contains(key)) {
      return absl::InternalError(
          absl::StrCat("iperf3's report has no end.sum_received.bits_per_second:\n", output));
    }
    node = &(*node)[key];
  }
  if (!node->is_number()) {
    return absl::InternalError("iperf3's end.sum_received.bits_per_second is not a number");
  }
  (void)server->Wait(absl::Seconds(5));
  return node->get<double>() / 8;
}

// ---------------------------------------------------------------------------------------
// Baseline 2: a bare gRPC echo service, in a second process (this binary, re-executed).

class EchoServiceImpl final : public EchoService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* ctx, const Payload* request,
                                 Payload* response) override {
    response->set_data(request->data());
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Get(grpc::CallbackServerContext* ctx, const GetRequest* request,
                                Payload* response) override {
    auto* reactor = ctx->DefaultReactor();
    if (request->size() < 0 || request->size() > static_cast<int64_t>(payload_.size())) {
      reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "size out of range"));
    } else {
      response->set_data(payload_.data(), static_cast<size_t>(request->size()));
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

  grpc::ServerUnaryReactor* Put(grpc::CallbackServerContext* ctx, const Payload* request,
                                PutResponse* response) override {
    response->set_size(static_cast<int64_t>(request->data().size()));
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  const std::string payload_ = std::string(64 * kMiB, 'x');
};

int RunEchoServer(int64_t port) {
  EchoServiceImpl service;
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  builder.SetMaxSendMessageSize(std::numeric_limits<int>::max());
  int bound = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    std::cerr << "echo server: cannot listen on port " << port << "\n";
    return 1;
  }
  server->Wait();  // until SIGTERM ends the process
  return 0;
}

struct GrpcBaseline {
  double get_bytes_per_s[2] = {kNaN, kNaN};  // 16, 64 MiB
  double put_bytes_per_s[2] = {kNaN, kNaN};
  double get_cpu[2] = {kNaN, kNaN};
  double put_cpu[2] = {kNaN, kNaN};
};

// The bare gRPC echo server (this binary re-executed as a second process) and a client of it
// over a plain channel, kept for the whole run so that its latency can be sampled interleaved
// with shardps' (both then see the same machine load). Stops the server when destroyed.
class EchoPeer {
 public:
  static absl::StatusOr<std::unique_ptr<EchoPeer>> Start() {
    auto peer = std::unique_ptr<EchoPeer>(new EchoPeer);
    const int port = testing::PickFreePort();
    ASSIGN_OR_RETURN(peer->server_,
                     Process::Start(testing::SelfPath(), {absl::StrCat("--echo_server_port=", port)}, {},
                                    absl::StrCat(testing::TempDir(), "/echo_server.log")));
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    peer->stub_ = EchoService::NewStub(grpc::CreateCustomChannel(
        absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(), args));
    peer->tiny_.set_data("abcd");
    absl::Status up;
    for (int i = 0; i < 100; ++i) {
      up = peer->EchoSync();
      if (up.ok()) return peer;
      if (!peer->server_->Running()) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return absl::InternalError(absl::StrCat("echo server did not answer: ", up.message(), "\n",
                                            peer->server_->Log()));
  }

  ~EchoPeer() {
    if (server_ != nullptr) {
      server_->Signal(SIGTERM);
      (void)server_->Wait(absl::Seconds(5));
    }
  }

  pid_t pid() const { return server_->pid(); }
  EchoService::Stub* stub() { return stub_.get(); }

  // A 4-byte round trip with the blocking stub.
  absl::Status EchoSync() {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    Payload reply;
    grpc::Status s = stub_->Echo(&ctx, tiny_, &reply);
    if (!s.ok()) return absl::UnavailableError(absl::StrCat("echo: ", s.error_message()));
    return absl::OkStatus();
  }

  // The same with the callback stub (the API PsClient's transport uses), waited for.
  absl::Status EchoCallback() {
    grpc::ClientContext ctx;
    Payload reply;
    absl::Notification done;
    grpc::Status status;
    stub_->async()->Echo(&ctx, &tiny_, &reply, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    done.WaitForNotification();
    if (!status.ok()) return absl::UnavailableError(status.error_message());
    return absl::OkStatus();
  }

 private:
  EchoPeer() = default;
  std::unique_ptr<Process> server_;
  std::unique_ptr<EchoService::Stub> stub_;
  Payload tiny_;
};

// Unary goodput of bulk payloads over bare gRPC, one call at a time.
absl::StatusOr<GrpcBaseline> MeasureBareGrpc(const Config& config, EchoPeer* echo) {
  EchoService::Stub* stub = echo->stub();
  const CpuMeter meter({getpid(), echo->pid()});
  GrpcBaseline b;
  const int64_t sizes[2] = {16 * kMiB, 64 * kMiB};
  for (int i = 0; i < 2; ++i) {
    GetRequest get;
    get.set_size(sizes[i]);
    ASSIGN_OR_RETURN(Timing t, TimeCalls(config.warmup, config.reps, meter, [&]() -> absl::Status {
                       grpc::ClientContext ctx;
                       Payload reply;
                       grpc::Status s = stub->Get(&ctx, get, &reply);
                       if (!s.ok()) return absl::UnavailableError(s.error_message());
                       if (static_cast<int64_t>(reply.data().size()) != sizes[i]) {
                         return absl::InternalError("short Get reply");
                       }
                       return absl::OkStatus();
                     }));
    b.get_bytes_per_s[i] = sizes[i] / t.median_s;
    b.get_cpu[i] = t.cpu_per_wall;
    Payload put;
    put.set_data(std::string(static_cast<size_t>(sizes[i]), 'y'));
    ASSIGN_OR_RETURN(t, TimeCalls(config.warmup, config.reps, meter, [&]() -> absl::Status {
                       grpc::ClientContext ctx;
                       PutResponse reply;
                       grpc::Status s = stub->Put(&ctx, put, &reply);
                       if (!s.ok()) return absl::UnavailableError(s.error_message());
                       if (reply.size() != sizes[i]) return absl::InternalError("short Put");
                       return absl::OkStatus();
                     }));
    b.put_bytes_per_s[i] = sizes[i] / t.median_s;
    b.put_cpu[i] = t.cpu_per_wall;
  }
  return b;
}

// ---------------------------------------------------------------------------------------
// Baseline 3 (with TLS): openssl's AES-128-GCM, the cipher gRPC's TLS 1.3 picks here.

struct AesGcmSpeed {
  double one_process = kNaN;  // bytes/s of 16 KiB blocks, one process (one core)
  double multi = kNaN;        // the same with -multi 2, all processes together
  std::string skipped;        // why not measured ("": measured)
};

// The 16 KiB-block column of the AES-128-GCM line `openssl speed` prints (in 1000s of bytes
// per second, "4366077.31k"), as bytes per second.
absl::StatusOr<double> ParseOpensslSpeed(const std::string& output) {
  double found = kNaN;
  for (absl::string_view line : absl::StrSplit(output, '\n')) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    if (words.size() != 7 || !absl::EqualsIgnoreCase(words[0], "aes-128-gcm")) continue;
    absl::string_view k = words[6];
    if (!absl::ConsumeSuffix(&k, "k")) continue;
    double v = 0;
    if (absl::SimpleAtod(k, &v) && v > 0) found = v * 1000;
  }
  if (std::isnan(found)) {
    return absl::InternalError(absl::StrCat("no AES-128-GCM line in openssl speed's output:\n",
                                            output));
  }
  return found;
}

AesGcmSpeed MeasureAesGcm(const Config& config) {
  AesGcmSpeed speed;
  if (config.openssl_seconds == 0) {
    speed.skipped = "--openssl_seconds=0";
    return speed;
  }
  const std::string openssl = FindInPath("openssl");
  if (openssl.empty()) {
    speed.skipped = "openssl not found";
    std::cerr << "openssl not found: the AES-GCM baseline is skipped\n";
    return speed;
  }
  for (int multi : {1, 2}) {
    std::cerr << "openssl speed -evp aes-128-gcm -seconds " << config.openssl_seconds
              << (multi > 1 ? " -multi 2" : "") << "...\n";
    std::vector<std::string> args = {"speed", "-evp", "aes-128-gcm", "-seconds",
                                     absl::StrCat(config.openssl_seconds)};
    if (multi > 1) {
      args.push_back("-multi");
      args.push_back(absl::StrCat(multi));
    }
    std::string output;
    absl::StatusOr<int> code =
        testing::RunCommand(openssl, args, {}, &output,
                            absl::Seconds(static_cast<double>(config.openssl_seconds) * 8 + 60));
    absl::StatusOr<double> bps =
        !code.ok()    ? absl::StatusOr<double>(code.status())
        : *code != 0 ? absl::StatusOr<double>(absl::InternalError(
                            absl::StrCat("openssl speed exited with ", *code, ":\n", output)))
                      : ParseOpensslSpeed(output);
    if (!bps.ok()) {
      std::cerr << "openssl speed" << (multi > 1 ? " -multi 2" : "")
                << " gave no figure: " << bps.status() << "\n";
      if (multi == 1) speed.skipped = "openssl speed failed";
      continue;
    }
    (multi == 1 ? speed.one_process : speed.multi) = *bps;
  }
  return speed;
}

// A CA, the ps daemons' certificate and the client's (URI SAN spiffe://shardps/chief/0, a
// role that may make every call of the ps), made with openssl in `dir`: ECDSA P-256, as
// deploy/certs.sh makes them. The ps daemons listen on loopback addresses of this process'
// /24 (tests/process.h LoopbackAddress: 127.A.B.1, .2, ... in order), so one certificate that
// names all of 127.A.B.1-254 serves every ps of the run.
struct BenchPki {
  TlsOptions client;                  // the bench's channels: chief's certificate, the CA
  std::vector<std::string> ps_flags;  // the daemons' TLS flags, client certificates required
};

absl::StatusOr<BenchPki> MakeBenchPki() {
  const std::string probe = testing::LoopbackAddress();  // learns the /24 (uses one address)
  const size_t last_dot = probe.rfind('.');
  if (probe.empty() || last_dot == std::string::npos) {
    return absl::InternalError("no loopback address to learn the ps daemons' /24 from");
  }
  const std::string prefix = probe.substr(0, last_dot + 1);  // "127.A.B."
  std::string ps_sans = "DNS:localhost,IP:127.0.0.1,URI:spiffe://shardps/ps/0";
  for (int i = 1; i <= 254; ++i) absl::StrAppend(&ps_sans, ",IP:", prefix, i);
  const std::string dir = absl::StrCat(testing::TempDir(), "/tls_pki");
  const std::string script = absl::StrCat(
      "set -e; rm -rf '", dir, "'; mkdir -p '", dir, "'; cd '", dir, "'\n",
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 ",
      "-subj /CN=bench-ca -keyout ca.key -out ca.crt\n",
      "issue() {\n",
      "  printf 'subjectAltName=%s\\n' \"$2\" > \"$1.ext\"\n",
      "  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj \"/CN=$1\" ",
      "-keyout \"$1.key\" -out \"$1.csr\"\n",
      "  openssl x509 -req -in \"$1.csr\" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 ",
      "-extfile \"$1.ext\" -out \"$1.crt\"\n",
      "}\n",
      "issue ps '", ps_sans, "'\n",
      "issue chief 'DNS:localhost,URI:spiffe://shardps/chief/0'\n");
  std::string output;
  ASSIGN_OR_RETURN(int code, testing::RunCommand("/bin/sh", {"-c", script}, {}, &output));
  if (code != 0) {
    return absl::InternalError(
        absl::StrCat("making the bench's certificates with openssl failed (", code, "):\n",
                     output));
  }
  BenchPki pki;
  pki.client.ca_file = dir + "/ca.crt";
  pki.client.cert_file = dir + "/chief.crt";
  pki.client.key_file = dir + "/chief.key";
  RETURN_IF_ERROR(pki.client.Validate());
  pki.ps_flags = {"--tls_cert_file=" + dir + "/ps.crt", "--tls_key_file=" + dir + "/ps.key",
                  "--tls_ca_file=" + dir + "/ca.crt", "--tls_client_auth"};
  return pki;
}

// ---------------------------------------------------------------------------------------
// shardps: two ps daemons, one PsClient.

struct ShardpsResults {
  double pull_bytes_per_s[3] = {kNaN, kNaN, kNaN};  // 1, 16, 64 MiB
  double push_bytes_per_s[3] = {kNaN, kNaN, kNaN};
  double pull_cpu[3] = {kNaN, kNaN, kNaN};
  double push_cpu[3] = {kNaN, kNaN, kNaN};
  Timing tiny_pull;
  // Bare gRPC 4-byte echoes, sampled interleaved with the 4-byte pulls.
  Timing echo_sync;      // blocking stub
  Timing echo_callback;  // callback stub (the API PsClient's transport uses)
  // iperf3 again, right after the dense transfers (NaN when not run).
  double loopback_after = kNaN;
  struct Rows {
    int64_t width = 0;
    Timing pull;
    Timing push;
  };
  Rows rows[2];
  // Zipf batches, deduplicated by the caller: each call's time includes the dedup (and, for
  // a push, summing the duplicates' gradients).
  Timing zipf_pull;
  Timing zipf_push;
  double zipf_unique_per_batch = kNaN;  // mean distinct ids per batch
  Timing adam_push;
  Timing noop_push;
};

constexpr int64_t kDenseMiB[3] = {1, 16, 64};
constexpr int64_t kDenseWidth = 1024;  // floats per row: 4 KiB rows
constexpr int64_t kNumIds = 65536;
constexpr int64_t kTableRows = int64_t{1} << 20;
constexpr int64_t kRowWidths[2] = {64, 1};
// Zipf batches: kNumIds draws each over the first kZipfRows rows of table_w64, exponent
// kZipfExponent (HugeCTR's synthetic data uses 1.01-1.2), through a fixed random permutation
// of the rows so that the hot rows are spread over both shards, as hashed ids would be.
constexpr int64_t kZipfRows = 1000000;
constexpr double kZipfExponent = 1.1;
constexpr int kZipfBatches = 8;

VariableDef Def(const std::string& name, std::vector<int64_t> shape, OptimizerSpec::Type type,
                double lr) {
  VariableDef def;
  def.name = name;
  def.shape = std::move(shape);
  def.optimizer.set_type(type);
  def.optimizer.set_learning_rate(lr);
  return def;
}

// Two ps daemons, a client of them, and the meter of its and their CPU time.
struct ShardpsSetup {
  std::unique_ptr<PsCluster> cluster;
  std::unique_ptr<PsClient> client;
  std::unique_ptr<CpuMeter> meter;
};

// `pki` null: plaintext. Otherwise the daemons serve mutual TLS and the process's channels
// (the cluster's health probe and the client: both made here) present the chief's
// certificate; channels made earlier keep their plaintext credentials.
absl::StatusOr<ShardpsSetup> StartShardps(const Config& config, const BenchPki* pki) {
  ShardpsSetup setup;
  std::cerr << "starting 2 ps daemons" << (pki != nullptr ? " (mutual TLS)" : "") << "...\n";
  if (pki != nullptr) SetProcessTls(pki->client);
  std::vector<std::string> ps_flags =
      pki != nullptr ? pki->ps_flags : std::vector<std::string>{};
  // Each ps listens on a loopback address of its own: one port number serves both.
  if (config.ps_metrics_port > 0) {
    ps_flags.push_back(absl::StrCat("--metrics_port=", config.ps_metrics_port));
  }
  ps_flags.insert(ps_flags.end(), config.extra_ps_flags.begin(), config.extra_ps_flags.end());
  ASSIGN_OR_RETURN(setup.cluster, PsCluster::Start(2, ps_flags));
  PsClient::Options options;
  if (config.max_chunk_bytes > 0) options.max_chunk_bytes = config.max_chunk_bytes;
  if (config.calls_in_flight_per_ps >= 0) {
    options.calls_in_flight_per_ps = static_cast<int>(config.calls_in_flight_per_ps);
  }
  if (config.connections_per_ps > 0) {
    ASSIGN_OR_RETURN(setup.client,
                     NewGrpcPsClient(setup.cluster->addresses(), options,
                                     static_cast<int>(config.connections_per_ps)));
  } else {
    ASSIGN_OR_RETURN(setup.client, NewGrpcPsClient(setup.cluster->addresses(), options));
  }
  setup.meter = std::make_unique<CpuMeter>(std::vector<pid_t>{
      getpid(), setup.cluster->ps(0)->pid(), setup.cluster->ps(1)->pid()});
  return setup;
}

// Every variable the benchmark uses, each split over both ps tasks (`dense_only`: the dense
// and 4-byte ones, for the second cluster of --tls=both).
absl::Status CreateBenchVariables(PsClient& client, bool dense_only) {
  std::vector<VariableDef> defs;
  for (int64_t mib : kDenseMiB) {
    defs.push_back(Def(absl::StrCat("dense_", mib, "MiB"),
                       {mib * kMiB / 4 / kDenseWidth, kDenseWidth}, OptimizerSpec::SGD, 1e-3));
  }
  defs.push_back(Def("tiny", {1}, OptimizerSpec::SGD, 1e-3));
  for (int64_t width : kRowWidths) {
    if (dense_only) break;
    defs.push_back(
        Def(absl::StrCat("table_w", width), {kTableRows, width}, OptimizerSpec::SGD, 1e-3));
  }
  if (!dense_only) {
    defs.push_back(Def("adam_16MiB", {16 * kMiB / 4 / kDenseWidth, kDenseWidth},
                       OptimizerSpec::ADAM, 1e-3));
    defs.push_back(Def("noop_16MiB", {16 * kMiB / 4 / kDenseWidth, kDenseWidth},
                       OptimizerSpec::NOOP, 1e-3));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Partitioner> partitioner, NewFixedShardsPartitioner(2));
  ASSIGN_OR_RETURN(std::unique_ptr<Placer> placer, NewRoundRobinPlacer(2));
  std::cerr << "creating variables...\n";
  RETURN_IF_ERROR(client.CreateVariables(defs, *partitioner, placer.get()));
  for (const VariableDef& def : defs) {
    ASSIGN_OR_RETURN(VariableLayout layout, client.GetLayout(def.name));
    const bool split = layout.shards.size() == 2 && layout.shards[0].ps != layout.shards[1].ps;
    if (def.shape[0] > 1 && !split) {
      return absl::InternalError(absl::StrCat(def.name, " is not split over both ps tasks"));
    }
  }
  return absl::OkStatus();
}

// One cluster and its figures, for the measurements that take turns between clusters.
struct Side {
  ShardpsSetup* setup;
  ShardpsResults* results;
};

// TimeCalls over several sides: after `warmup` untimed calls on each, `reps` rounds in which
// each side makes one timed call, the order rotating from round to round, so that every side
// sees the same machine. Each side's CPU-seconds per wall-second is summed over its own calls.
absl::StatusOr<std::vector<Timing>> TimeAlternating(
    int warmup, int reps, const std::vector<Side>& sides,
    const std::function<absl::Status(int side)>& fn) {
  const int n = static_cast<int>(sides.size());
  for (int i = 0; i < warmup; ++i) {
    for (int k = 0; k < n; ++k) RETURN_IF_ERROR(fn(k));
  }
  std::vector<std::vector<double>> samples(static_cast<size_t>(n));
  std::vector<double> wall(static_cast<size_t>(n), 0), cpu(static_cast<size_t>(n), 0);
  for (int i = 0; i < reps; ++i) {
    for (int j = 0; j < n; ++j) {
      const int k = (i + j) % n;
      const CpuMeter& meter = *sides[static_cast<size_t>(k)].setup->meter;
      const double c0 = meter.Total();
      const double t0 = Now();
      RETURN_IF_ERROR(fn(k));
      const double dt = Now() - t0;
      cpu[static_cast<size_t>(k)] += meter.Total() - c0;
      wall[static_cast<size_t>(k)] += dt;
      samples[static_cast<size_t>(k)].push_back(dt);
    }
  }
  std::vector<Timing> out;
  for (int k = 0; k < n; ++k) {
    Timing t = Summarize(samples[static_cast<size_t>(k)]);
    const double w = wall[static_cast<size_t>(k)];
    t.cpu_per_wall = w > 0 ? cpu[static_cast<size_t>(k)] / w : kNaN;
    out.push_back(t);
  }
  return out;
}

absl::Status MeasureDense(const Config& config, const std::vector<Side>& sides) {
  for (int i = 0; i < 3; ++i) {
    const int64_t bytes = kDenseMiB[i] * kMiB;
    const std::string name = absl::StrCat("dense_", kDenseMiB[i], "MiB");
    std::cerr << "dense " << kDenseMiB[i] << " MiB"
              << (sides.size() > 1 ? ", the clusters taking turns" : "") << "...\n";
    std::vector<float> buffer(static_cast<size_t>(bytes / 4), 1e-3f);
    ASSIGN_OR_RETURN(std::vector<Timing> pull,
                     TimeAlternating(config.warmup, config.reps, sides, [&](int k) {
                       return sides[static_cast<size_t>(k)].setup->client->Pull(
                           name, absl::MakeSpan(buffer));
                     }));
    std::fill(buffer.begin(), buffer.end(), 1e-3f);
    ASSIGN_OR_RETURN(std::vector<Timing> push,
                     TimeAlternating(config.warmup, config.reps, sides, [&](int k) {
                       return sides[static_cast<size_t>(k)].setup->client->Push(name, buffer);
                     }));
    for (size_t k = 0; k < sides.size(); ++k) {
      ShardpsResults* r = sides[k].results;
      r->pull_bytes_per_s[i] = bytes / pull[k].median_s;
      r->push_bytes_per_s[i] = bytes / push[k].median_s;
      r->pull_cpu[i] = pull[k].cpu_per_wall;
      r->push_cpu[i] = push[k].cpu_per_wall;
    }
  }
  return absl::OkStatus();
}

// Blocks of back-to-back calls of one kind (warm, as in a loop of pulls), the kinds taking
// turns, so that the pull and its bare gRPC baselines see the same machine (this one is
// shared and noisy). The first calls of a block are not timed.
// With several sides, each side's pull is one more kind taking turns with the others.
absl::Status MeasureSmall(const Config& config, const std::vector<Side>& sides, EchoPeer* echo) {
  std::cerr << "4-byte round trips: shardps pull and bare gRPC, in alternating blocks...\n";
  constexpr int kBlock = 100, kBlockWarmup = 10;
  float one = 0;
  const int pulls = static_cast<int>(sides.size());
  const int kinds = pulls + (echo != nullptr ? 2 : 0);
  std::vector<std::vector<double>> samples(static_cast<size_t>(pulls + 2));
  auto call = [&](int which) {
    return which < pulls ? sides[static_cast<size_t>(which)].setup->client->Pull(
                               "tiny", absl::MakeSpan(&one, 1))
           : which == pulls ? echo->EchoSync()
                            : echo->EchoCallback();
  };
  for (int k = 0; k < kinds; ++k) {  // warm-up
    for (int i = 0; i < config.latency_samples / 10; ++i) RETURN_IF_ERROR(call(k));
  }
  for (int block = 0; static_cast<int>(samples[0].size()) < config.latency_samples; ++block) {
    for (int k = 0; k < kinds; ++k) {
      const int which = (block + k) % kinds;
      for (int i = 0; i < kBlockWarmup + kBlock; ++i) {
        const double t0 = Now();
        RETURN_IF_ERROR(call(which));
        if (i >= kBlockWarmup) samples[static_cast<size_t>(which)].push_back(Now() - t0);
      }
    }
  }
  for (int k = 0; k < pulls; ++k) {
    ShardpsResults* r = sides[static_cast<size_t>(k)].results;
    r->tiny_pull = Summarize(samples[static_cast<size_t>(k)]);
    r->echo_sync = Summarize(samples[static_cast<size_t>(pulls)]);
    r->echo_callback = Summarize(samples[static_cast<size_t>(pulls + 1)]);
  }
  return absl::OkStatus();
}

absl::Status MeasureRows(const Config& config, PsClient* client, const CpuMeter& meter,
                         const std::vector<int64_t>& ids, ShardpsResults* r) {
  for (int w = 0; w < 2; ++w) {
    const int64_t width = kRowWidths[w];
    const std::string name = absl::StrCat("table_w", width);
    std::cerr << "rows of width " << width << "...\n";
    std::vector<float> rows(static_cast<size_t>(kNumIds * width), 1e-3f);
    r->rows[w].width = width;
    ASSIGN_OR_RETURN(r->rows[w].pull, TimeCalls(config.warmup, config.reps, meter, [&] {
                       return client->PullRows(name, ids, absl::MakeSpan(rows));
                     }));
    std::fill(rows.begin(), rows.end(), 1e-3f);
    ASSIGN_OR_RETURN(r->rows[w].push, TimeCalls(config.warmup, config.reps, meter, [&] {
                       return client->PushRows(name, ids, rows);
                     }));
  }
  return absl::OkStatus();
}

// kZipfBatches batches of kNumIds Zipf draws, through a permutation shuffled by `rng`.
std::vector<std::vector<int64_t>> ZipfBatches(std::mt19937_64& rng) {
  std::vector<int64_t> permutation(kZipfRows);
  for (int64_t i = 0; i < kZipfRows; ++i) permutation[static_cast<size_t>(i)] = i;
  std::shuffle(permutation.begin(), permutation.end(), rng);
  absl::zipf_distribution<int64_t> zipf(kZipfRows - 1, kZipfExponent, 1.0);
  absl::BitGen gen;
  std::vector<std::vector<int64_t>> batches(kZipfBatches);
  for (std::vector<int64_t>& batch : batches) {
    batch.resize(kNumIds);
    for (int64_t& id : batch) id = permutation[static_cast<size_t>(zipf(gen))];
  }
  return batches;
}

absl::Status MeasureZipfRows(const Config& config, PsClient* client, const CpuMeter& meter,
                             std::mt19937_64& rng, ShardpsResults* r) {
  std::cerr << "rows under Zipf(" << kZipfExponent << "), deduplicated...\n";
  const std::vector<std::vector<int64_t>> batches = ZipfBatches(rng);
  const int64_t width = kRowWidths[0];
  const std::string name = absl::StrCat("table_w", width);
  std::vector<float> rows(static_cast<size_t>(kNumIds * width), 1e-3f);
  std::vector<float> grads(static_cast<size_t>(kNumIds * width), 1e-3f);
  std::vector<float> summed;
  std::vector<int64_t> unique;
  std::vector<uint32_t> slot;
  int next = 0;
  double unique_total = 0;
  int batches_seen = 0;
  auto dedup = [&](const std::vector<int64_t>& batch) {
    UniqueIds(batch, kTableRows, &unique, &slot);
    unique_total += static_cast<double>(unique.size());
    ++batches_seen;
  };
  ASSIGN_OR_RETURN(r->zipf_pull, TimeCalls(config.warmup, config.reps, meter, [&] {
                     dedup(batches[static_cast<size_t>(next++ % kZipfBatches)]);
                     return client->PullRows(
                         name, unique,
                         absl::MakeSpan(rows.data(), unique.size() * static_cast<size_t>(width)));
                   }));
  ASSIGN_OR_RETURN(r->zipf_push, TimeCalls(config.warmup, config.reps, meter, [&] {
                     const std::vector<int64_t>& batch =
                         batches[static_cast<size_t>(next++ % kZipfBatches)];
                     dedup(batch);
                     // Each distinct row's gradient: the sum of its occurrences'.
                     summed.assign(unique.size() * static_cast<size_t>(width), 0.0f);
                     for (size_t k = 0; k < batch.size(); ++k) {
                       float* row = summed.data() + slot[k] * width;
                       const float* g = grads.data() + k * width;
                       for (int64_t j = 0; j < width; ++j) row[j] += g[j];
                     }
                     return client->PushRows(name, unique, summed);
                   }));
  r->zipf_unique_per_batch = unique_total / batches_seen;
  return absl::OkStatus();
}

// Adam and NOOP pushes interleaved, so that both see the same machine state.
absl::Status MeasureOptimizers(const Config& config, PsClient* client, const CpuMeter& meter,
                               ShardpsResults* r) {
  std::cerr << "Adam vs NOOP pushes...\n";
  std::vector<float> grad(static_cast<size_t>(16 * kMiB / 4), 1e-3f);
  std::vector<double> adam, noop;
  double adam_wall = 0, noop_wall = 0, adam_cpu = 0, noop_cpu = 0;
  for (int i = 0; i < config.warmup + config.reps; ++i) {
    for (int which = 0; which < 2; ++which) {
      const double c0 = meter.Total();
      const double t0 = Now();
      RETURN_IF_ERROR(client->Push(which == 0 ? "adam_16MiB" : "noop_16MiB", grad));
      const double dt = Now() - t0;
      const double dc = meter.Total() - c0;
      if (i < config.warmup) continue;
      (which == 0 ? adam : noop).push_back(dt);
      (which == 0 ? adam_wall : noop_wall) += dt;
      (which == 0 ? adam_cpu : noop_cpu) += dc;
    }
  }
  r->adam_push.median_s = Median(adam);
  r->noop_push.median_s = Median(noop);
  r->adam_push.cpu_per_wall = adam_cpu / adam_wall;
  r->noop_push.cpu_per_wall = noop_cpu / noop_wall;
  return absl::OkStatus();
}

// The figures of a run: those of the cluster of --tls (plaintext with --tls=both), and with
// --tls=both the mutual-TLS cluster's dense and 4-byte ones.
struct ShardpsRun {
  ShardpsResults main;
  ShardpsResults tls;  // --tls=both only
};

// `echo` (optional) is sampled interleaved with the 4-byte pulls; `loopback` runs iperf3
// again after the dense transfers. `pki`: the certificates for --tls on or both.
absl::StatusOr<ShardpsRun> MeasureShardps(
    const Config& config, EchoPeer* echo,
    const std::function<absl::StatusOr<double>()>& loopback, const BenchPki* pki) {
  // The plaintext cluster first: its channels are made before the process's turn to TLS.
  ASSIGN_OR_RETURN(ShardpsSetup setup, StartShardps(config, config.tls == "on" ? pki : nullptr));
  ShardpsSetup tls_setup;
  if (config.tls_both()) {
    ASSIGN_OR_RETURN(tls_setup, StartShardps(config, pki));
  }
  PsClient* const client = setup.client.get();
  const CpuMeter& meter = *setup.meter;
  RETURN_IF_ERROR(CreateBenchVariables(*client, /*dense_only=*/false));
  if (config.tls_both()) {
    RETURN_IF_ERROR(CreateBenchVariables(*tls_setup.client, /*dense_only=*/true));
  }
  ShardpsRun run;
  ShardpsResults& r = run.main;
  std::vector<Side> sides = {{&setup, &run.main}};
  if (config.tls_both()) sides.push_back({&tls_setup, &run.tls});
  if (config.Wants("dense")) RETURN_IF_ERROR(MeasureDense(config, sides));
  if (config.Wants("dense") && config.Wants("iperf3")) {
    std::cerr << "iperf3 loopback again...\n";
    ASSIGN_OR_RETURN(r.loopback_after, loopback());
  }
  if (config.Wants("small")) RETURN_IF_ERROR(MeasureSmall(config, sides, echo));
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<int64_t> pick(0, kTableRows - 1);
  std::vector<int64_t> ids(kNumIds);
  for (int64_t& id : ids) id = pick(rng);  // duplicates allowed, as in a real batch
  if (config.Wants("rows")) {
    RETURN_IF_ERROR(MeasureRows(config, client, meter, ids, &r));
    RETURN_IF_ERROR(MeasureZipfRows(config, client, meter, rng, &r));
  }
  if (config.Wants("optimizer")) RETURN_IF_ERROR(MeasureOptimizers(config, client, meter, &r));
  return run;
}

// ---------------------------------------------------------------------------------------

constexpr char kBaselines[] = "baselines";

Figure GoodputFigure(std::string section, std::string key, std::string label, double bps) {
  Figure f;
  f.section = std::move(section);
  f.key = std::move(key);
  f.label = std::move(label);
  f.value = MiBps(bps);
  f.unit = "MiB/s";
  f.bytes_per_s = bps;
  return f;
}

Figure LatencyFigure(std::string section, std::string key, std::string label, double s) {
  Figure f;
  f.section = std::move(section);
  f.key = std::move(key);
  f.label = std::move(label);
  f.value = s * 1e6;
  f.unit = "us";
  return f;
}

void AddBaselineFigures(const Config& config, double loopback, const GrpcBaseline& g,
                        const ShardpsResults& r, std::vector<Figure>* out) {
  if (config.Wants("iperf3")) {
    out->push_back(GoodputFigure(kBaselines, "iperf3_loopback",
                                 std::isnan(r.loopback_after)
                                     ? "iperf3 loopback TCP, 1 stream"
                                     : "iperf3 loopback, 1 stream, best of 2",
                                 loopback));
  }
  if (config.Wants("small")) {
    out->push_back(LatencyFigure(kBaselines, "grpc_echo_p50", "bare gRPC 4 B echo p50",
                                 r.echo_sync.p50_s));
    out->push_back(LatencyFigure(kBaselines, "grpc_echo_p99", "bare gRPC 4 B echo p99",
                                 r.echo_sync.p99_s));
    out->push_back(LatencyFigure(kBaselines, "grpc_echo_callback_p50",
                                 "bare gRPC 4 B echo p50 (callback)", r.echo_callback.p50_s));
    out->push_back(LatencyFigure(kBaselines, "grpc_echo_callback_p99",
                                 "bare gRPC 4 B echo p99 (callback)", r.echo_callback.p99_s));
  }
  const char* size_names[2] = {"16MiB", "64MiB"};
  for (int i = 0; i < 2 && config.Wants("grpc"); ++i) {
    Figure f = GoodputFigure(kBaselines, absl::StrCat("grpc_get_", size_names[i]),
                             absl::StrCat("bare gRPC unary ", size_names[i], " server->client"),
                             g.get_bytes_per_s[i]);
    f.ratio = g.get_bytes_per_s[i] / loopback;
    f.ratio_of = "iperf3";
    f.cpu_per_wall = g.get_cpu[i];
    out->push_back(f);
    f = GoodputFigure(kBaselines, absl::StrCat("grpc_put_", size_names[i]),
                      absl::StrCat("bare gRPC unary ", size_names[i], " client->server"),
                      g.put_bytes_per_s[i]);
    f.ratio = g.put_bytes_per_s[i] / loopback;
    f.ratio_of = "iperf3";
    f.cpu_per_wall = g.put_cpu[i];
    out->push_back(f);
  }
}

void AddDenseFigures(const Config& config, double loopback, const GrpcBaseline& g,
                     const ShardpsResults& r, std::vector<Figure>* out) {
  const std::string dense = absl::StrCat("shardps dense (2 ps, FixedShards(2)",
                                         config.tls == "on" ? ", mutual TLS" : "", ")");
  for (int dir = 0; dir < 2; ++dir) {
    for (int i = 0; i < 3; ++i) {
      const double bps = dir == 0 ? r.pull_bytes_per_s[i] : r.push_bytes_per_s[i];
      const char* what = dir == 0 ? "pull" : "push";
      Figure f = GoodputFigure(dense, absl::StrCat(what, "_", kDenseMiB[i], "MiB"),
                               absl::StrCat("dense ", what, " ", kDenseMiB[i], " MiB"), bps);
      f.ratio = bps / loopback;
      f.ratio_of = "iperf3";
      f.cpu_per_wall = dir == 0 ? r.pull_cpu[i] : r.push_cpu[i];
      if (kDenseMiB[i] >= 16) {
        f.target_op = ">=";
        f.target = 0.6;
        const int k = kDenseMiB[i] == 16 ? 0 : 1;
        f.grpc_ratio = bps / (dir == 0 ? g.get_bytes_per_s[k] : g.put_bytes_per_s[k]);
      }
      out->push_back(f);
    }
  }
}

void AddSmallFigures(const Config& config, const ShardpsResults& r, std::vector<Figure>* out) {
  const std::string small = config.tls == "on" ? "shardps small (mutual TLS)" : "shardps small";
  Figure f = LatencyFigure(small, "pull_4B_p50", "pull 4 B p50", r.tiny_pull.p50_s);
  f.ratio = r.tiny_pull.p50_s / r.echo_sync.p50_s;
  f.ratio_of = "bare gRPC p50";
  f.target_op = "<=";
  f.target = 1.2;
  out->push_back(f);
  f = LatencyFigure(small, "pull_4B_p99", "pull 4 B p99", r.tiny_pull.p99_s);
  f.ratio = r.tiny_pull.p99_s / r.echo_sync.p99_s;
  f.ratio_of = "bare gRPC p99";
  out->push_back(f);
}

void AddRowFigures(const Config& config, double loopback, const ShardpsResults& r,
                   std::vector<Figure>* out) {
  const std::string rows = "shardps rows (65536 random ids)";
  for (const auto& rw : r.rows) {
    for (int dir = 0; dir < 2; ++dir) {
      const Timing& t = dir == 0 ? rw.pull : rw.push;
      const char* what = dir == 0 ? "pull_rows" : "push_rows";
      Figure f;
      f.section = rows;
      f.key = absl::StrCat(what, "_w", rw.width);
      f.label = absl::StrCat(dir == 0 ? "PullRows" : "PushRows", " width ", rw.width);
      f.rows_per_s = kNumIds / t.median_s;
      f.value = f.rows_per_s;
      f.unit = "rows/s";
      f.bytes_per_s = kNumIds * rw.width * 4 / t.median_s;  // row payload only
      if (rw.width == 64 && config.Wants("dense")) {
        // 65536 rows of 64 floats: 16 MiB, the size of the dense transfer beside it.
        f.ratio = f.bytes_per_s / (dir == 0 ? r.pull_bytes_per_s[1] : r.push_bytes_per_s[1]);
        f.ratio_of = dir == 0 ? "dense pull 16 MiB" : "dense push 16 MiB";
        f.target_op = ">=";
        f.target = 0.8;
      } else {
        f.ratio = f.bytes_per_s / loopback;
        f.ratio_of = "iperf3";
      }
      f.cpu_per_wall = t.cpu_per_wall;
      out->push_back(f);
    }
  }
  // Unique rows per second of a deduplicated Zipf batch; bytes: the unique rows' payload.
  for (int dir = 0; dir < 2; ++dir) {
    const Timing& t = dir == 0 ? r.zipf_pull : r.zipf_push;
    Figure f;
    f.section = rows;
    f.key = absl::StrCat(dir == 0 ? "pull_rows" : "push_rows", "_zipf_dedup_w", kRowWidths[0]);
    f.label = absl::StrCat(dir == 0 ? "PullRows" : "PushRows", " Zipf(1.1) dedup, unique");
    f.rows_per_s = r.zipf_unique_per_batch / t.median_s;
    f.value = f.rows_per_s;
    f.unit = "rows/s";
    f.bytes_per_s = f.rows_per_s * kRowWidths[0] * 4;
    f.cpu_per_wall = t.cpu_per_wall;
    out->push_back(f);
  }
  Figure f;
  f.section = rows;
  f.key = "zipf_dedup_ratio";
  f.label = "Zipf(1.1) ids per unique id";
  f.value = kNumIds / r.zipf_unique_per_batch;
  f.unit = "x";
  out->push_back(f);
}

void AddOptimizerFigures(double loopback, const ShardpsResults& r, std::vector<Figure>* out) {
  const std::string opt = "shardps optimizer (16 MiB push)";
  const double noop = 16 * kMiB / r.noop_push.median_s;
  const double adam = 16 * kMiB / r.adam_push.median_s;
  Figure f = GoodputFigure(opt, "push_noop_16MiB", "push 16 MiB, NOOP", noop);
  f.ratio = noop / loopback;
  f.ratio_of = "iperf3";
  f.cpu_per_wall = r.noop_push.cpu_per_wall;
  out->push_back(f);
  f = GoodputFigure(opt, "push_adam_16MiB", "push 16 MiB, Adam", adam);
  f.ratio = adam / noop;
  f.ratio_of = "NOOP push";
  f.target_op = ">=";
  f.target = 0.9;
  f.cpu_per_wall = r.adam_push.cpu_per_wall;
  out->push_back(f);
}

constexpr double kTlsTarget = 0.7;  // issue 23: dense goodput with TLS >= 0.7 of plaintext
constexpr char kTlsSection[] = "TLS on vs off (mutual TLS, roles on; same run, alternating)";

void AddAesFigures(const AesGcmSpeed& aes, std::vector<Figure>* out) {
  if (!aes.skipped.empty()) return;
  out->push_back(GoodputFigure(kBaselines, "openssl_aes128gcm_16KiB",
                               "openssl AES-128-GCM 16 KiB, 1 core", aes.one_process));
  out->push_back(GoodputFigure(kBaselines, "openssl_aes128gcm_16KiB_multi2",
                               "openssl AES-128-GCM 16 KiB, -multi 2", aes.multi));
}

// --tls=both: each mutual-TLS figure as a ratio to the plaintext cluster's, same run.
void AddTlsFigures(const Config& config, const ShardpsRun& run, std::vector<Figure>* out) {
  const ShardpsResults& off = run.main;
  const ShardpsResults& on = run.tls;
  for (int dir = 0; dir < 2 && config.Wants("dense"); ++dir) {
    for (int i = 0; i < 3; ++i) {
      const char* what = dir == 0 ? "pull" : "push";
      const double bps_on = dir == 0 ? on.pull_bytes_per_s[i] : on.push_bytes_per_s[i];
      const double bps_off = dir == 0 ? off.pull_bytes_per_s[i] : off.push_bytes_per_s[i];
      Figure f = GoodputFigure(kTlsSection, absl::StrCat("tls_", what, "_", kDenseMiB[i], "MiB"),
                               absl::StrCat("dense ", what, " ", kDenseMiB[i], " MiB, TLS"),
                               bps_on);
      f.ratio = bps_on / bps_off;
      f.ratio_of = "plaintext";
      f.cpu_per_wall = dir == 0 ? on.pull_cpu[i] : on.push_cpu[i];
      if (kDenseMiB[i] >= 16) {
        f.target_op = ">=";
        f.target = kTlsTarget;
      }
      out->push_back(f);
    }
  }
  if (config.Wants("small")) {
    Figure f = LatencyFigure(kTlsSection, "tls_pull_4B_p50", "pull 4 B p50, TLS", on.tiny_pull.p50_s);
    f.ratio = on.tiny_pull.p50_s / off.tiny_pull.p50_s;
    f.ratio_of = "plaintext p50";
    out->push_back(f);
    f = LatencyFigure(kTlsSection, "tls_pull_4B_p99", "pull 4 B p99, TLS", on.tiny_pull.p99_s);
    f.ratio = on.tiny_pull.p99_s / off.tiny_pull.p99_s;
    f.ratio_of = "plaintext p99";
    out->push_back(f);
  }
}

// --tls=both's own table: per size goodput off and on, on/off against the target, and the
// TLS goodput over one core's AES-128-GCM (openssl speed).
std::string TlsTable(const Config& config, const ShardpsRun& run, const AesGcmSpeed& aes) {
  const ShardpsResults& off = run.main;
  const ShardpsResults& on = run.tls;
  std::string t = absl::StrCat(
      "\nTLS on vs off: 2 ps each, mutual TLS (ECDSA P-256, client certificate with role chief, "
      "roles on) against plaintext, the two clusters' repetitions alternating (the bare gRPC "
      "baseline above is plaintext)\n");
  if (aes.skipped.empty()) {
    absl::StrAppend(&t, "openssl speed -evp aes-128-gcm -seconds ", config.openssl_seconds,
                    ", 16 KiB blocks: 1 process ", Num(MiBps(aes.one_process), "%.0f"),
                    " MiB/s, -multi 2 ", Num(MiBps(aes.multi), "%.0f"), " MiB/s\n");
  } else {
    absl::StrAppend(&t, "openssl speed: skipped (", aes.skipped, ")\n");
  }
  const std::string header =
      absl::StrFormat("%-22s %11s %11s %7s %7s %-8s %12s %9s", "transfer", "off MiB/s",
                      "on MiB/s", "on/off", "target", "met", "on/AES 1core", "on cores");
  absl::StrAppend(&t, header, "\n", std::string(header.size(), '-'), "\n");
  for (int dir = 0; dir < 2 && config.Wants("dense"); ++dir) {
    for (int i = 0; i < 3; ++i) {
      const double a = dir == 0 ? off.pull_bytes_per_s[i] : off.push_bytes_per_s[i];
      const double b = dir == 0 ? on.pull_bytes_per_s[i] : on.push_bytes_per_s[i];
      const double ratio = b / a;
      const bool has_target = kDenseMiB[i] >= 16;
      absl::StrAppend(
          &t, absl::StrFormat("%-22s %11s %11s %7s %7s %-8s %12s %9s\n",
                              absl::StrCat("dense ", dir == 0 ? "pull " : "push ",
                                           kDenseMiB[i], " MiB"),
                              Num(MiBps(a), "%.1f"), Num(MiBps(b), "%.1f"),
                              Num(ratio, "%.2f"), has_target ? ">=0.7" : "",
                              !has_target ? "" : ratio >= kTlsTarget ? "met" : "MISSED",
                              Num(b / aes.one_process, "%.2f"),
                              Num(dir == 0 ? on.pull_cpu[i] : on.push_cpu[i], "%.2f")));
    }
  }
  if (config.Wants("small")) {
    absl::StrAppend(&t, absl::StrFormat("%-22s %11s %11s %7s\n", "pull 4 B p50 (us)",
                                        Num(off.tiny_pull.p50_s * 1e6, "%.1f"),
                                        Num(on.tiny_pull.p50_s * 1e6, "%.1f"),
                                        Num(on.tiny_pull.p50_s / off.tiny_pull.p50_s, "%.2f")));
    absl::StrAppend(&t, absl::StrFormat("%-22s %11s %11s %7s\n", "pull 4 B p99 (us)",
                                        Num(off.tiny_pull.p99_s * 1e6, "%.1f"),
                                        Num(on.tiny_pull.p99_s * 1e6, "%.1f"),
                                        Num(on.tiny_pull.p99_s / off.tiny_pull.p99_s, "%.2f")));
  }
  return t;
}

std::vector<Figure> BuildFigures(const Config& config, double loopback, const GrpcBaseline& g,
                                 const ShardpsRun& run, const AesGcmSpeed& aes) {
  const ShardpsResults& r = run.main;
  std::vector<Figure> out;
  AddBaselineFigures(config, loopback, g, r, &out);
  AddAesFigures(aes, &out);
  if (config.Wants("dense")) AddDenseFigures(config, loopback, g, r, &out);
  if (config.Wants("small")) AddSmallFigures(config, r, &out);
  if (config.tls_both()) AddTlsFigures(config, run, &out);
  if (config.Wants("rows")) AddRowFigures(config, loopback, r, &out);
  if (config.Wants("optimizer")) AddOptimizerFigures(loopback, r, &out);
  return out;
}

// The command line into `config` and `echo_server_port`; returns -1 to go on, else the exit
// code.
int ParseFlags(int argc, char** argv, Config* config, int64_t* echo_server_port) {
  int64_t reps = 0, latency_samples = 0;
  std::string only, ps_flags;
  FlagParser flags("transport_bench",
                   "shardps' data path against loopback TCP (iperf3) and bare gRPC.");
  flags.AddBool("json", &config->json, "print one JSON object on stdout (the table on stderr)");
  flags.AddBool("quick", &config->quick, "a short run: fewer repetitions");
  flags.AddInt("max_chunk_bytes", &config->max_chunk_bytes,
               "PsClient::Options.max_chunk_bytes (0: the library default)");
  flags.AddInt("calls_in_flight_per_ps", &config->calls_in_flight_per_ps,
               "PsClient::Options.calls_in_flight_per_ps (-1: the library default; 0: no limit)");
  flags.AddInt("connections_per_ps", &config->connections_per_ps,
               "TCP connections from the client to each ps (0: the library default)");
  flags.AddInt("reps", &reps, "timed repetitions per bulk figure (0: 10, or 3 with --quick)");
  flags.AddInt("latency_samples", &latency_samples,
               "timed calls per latency figure (0: 3000, or 300 with --quick)");
  flags.AddString("only", &only,
                  "comma-separated sections to run: iperf3,grpc,dense,small,rows,optimizer "
                  "(default: all; for profiling one part)");
  flags.AddString("tls", &config->tls,
                  "off: plaintext ps; on: mutual-TLS ps (roles on); both: the dense and 4-byte "
                  "figures on a plaintext and a mutual-TLS cluster, alternating, with on/off");
  flags.AddInt("ps_metrics_port", &config->ps_metrics_port,
               "the ps serve /metrics on this port, so that their data path counts (0: off; "
               "for the metrics on/off comparison, docs/observability.md)",
               {0, 65535});
  flags.AddString("ps_flags", &ps_flags,
                  "comma-separated flags for each ps daemon, e.g. "
                  "--max_request_memory_bytes=0 (to compare a ps setting in the same run)");
  flags.AddInt("openssl_seconds", &config->openssl_seconds,
               "with --tls on or both: `openssl speed -seconds N` of aes-128-gcm (0: skip)");
  flags.AddInt("echo_server_port", echo_server_port,
               "internal: serve the bare gRPC echo service on this port");
  const int rc = HandleParseResult(flags, flags.Parse(argc, argv));
  if (rc >= 0) return rc;
  if (config->quick) {
    config->warmup = 1;
    config->reps = 3;
    config->latency_samples = 300;
  }
  config->only = absl::StrSplit(only, ',', absl::SkipEmpty());
  config->extra_ps_flags = absl::StrSplit(ps_flags, ',', absl::SkipEmpty());
  for (const std::string& flag : config->extra_ps_flags) {
    if (!absl::StartsWith(flag, "--")) {
      std::cerr << "transport_bench: --ps_flags: \"" << flag << "\" is not a flag (--name=value)\n";
      return 2;
    }
  }
  if (config->tls != "off" && config->tls != "on" && config->tls != "both") {
    std::cerr << "transport_bench: --tls must be off, on or both, not \"" << config->tls
              << "\"\n";
    return 2;
  }
  if (config->openssl_seconds < 0) {
    std::cerr << "transport_bench: --openssl_seconds must be 0 or more\n";
    return 2;
  }
  if (reps > 0) config->reps = static_cast<int>(reps);
  if (latency_samples > 0) config->latency_samples = static_cast<int>(latency_samples);
  return -1;
}

// Every section asked for: the baselines, then shardps' data path. `tls_table`: with
// --tls=both, the on/off table (TlsTable).
absl::StatusOr<std::vector<Figure>> MeasureAll(const Config& config, double* first_loopback,
                                               double* second_loopback, std::string* tls_table) {
  const std::string iperf3 = FindInPath("iperf3");
  if (iperf3.empty() && config.Wants("iperf3")) {
    return absl::FailedPreconditionError(
        "iperf3 not found: install iperf3 (deploy/setup.sh does)");
  }
  absl::StatusOr<double> loopback = kNaN;
  if (config.Wants("iperf3")) {
    std::cerr << "iperf3 loopback...\n";
    loopback = MeasureIperf3(iperf3, 3);
    RETURN_IF_ERROR(loopback.status());
  }
  std::unique_ptr<EchoPeer> echo;
  if (config.Wants("grpc") || config.Wants("small")) {
    ASSIGN_OR_RETURN(echo, EchoPeer::Start());
  }
  GrpcBaseline grpc_baseline;
  if (config.Wants("grpc")) {
    std::cerr << "bare gRPC bulk...\n";
    ASSIGN_OR_RETURN(grpc_baseline, MeasureBareGrpc(config, echo.get()));
  }
  AesGcmSpeed aes;
  aes.skipped = "--tls=off";
  std::optional<BenchPki> pki;
  if (config.tls_any()) {
    aes = MeasureAesGcm(config);
    ASSIGN_OR_RETURN(pki, MakeBenchPki());
  }
  ASSIGN_OR_RETURN(ShardpsRun run, MeasureShardps(
                                       config, echo.get(),
                                       [&] { return MeasureIperf3(iperf3, 3); },
                                       pki.has_value() ? &*pki : nullptr));
  const ShardpsResults& shardps = run.main;
  *first_loopback = *loopback;
  *second_loopback = shardps.loopback_after;
  if (config.tls_both()) *tls_table = TlsTable(config, run, aes);
  // The machine's limit: the better of the two iperf3 runs (the other may have shared the
  // cores with someone else's work).
  const double limit = std::isnan(shardps.loopback_after)
                           ? *loopback
                           : std::max(*loopback, shardps.loopback_after);
  return BuildFigures(config, limit, grpc_baseline, run, aes);
}

int Main(int argc, char** argv) {
  TuneMallocForBulkTransfers();  // as the daemons do
  DisableMutexDeadlockDetection();
  Config config;
  int64_t echo_server_port = 0;
  if (const int rc = ParseFlags(argc, argv, &config, &echo_server_port); rc >= 0) return rc;
  if (echo_server_port > 0) return RunEchoServer(echo_server_port);
  testing::SetUpRunfilesForBazelRun(argv[0], "ps_server/ps", "transport_bench");
  const HostRun host_run;
  double loopback = kNaN, loopback_after = kNaN;
  std::string tls_table;
  absl::StatusOr<std::vector<Figure>> figures =
      MeasureAll(config, &loopback, &loopback_after, &tls_table);
  if (!figures.ok()) {
    std::cerr << "transport_bench: " << figures.status() << "\n";
    return 1;
  }
  const HostStats host = host_run.Stop();
  std::ostream& table = config.json ? std::cerr : std::cout;
  PrintTable(table, *figures, config);
  table << tls_table;
  table << "host during the run (bench/host_stats.h): " << host.Line() << "\n";
  if (config.json) {
    nlohmann::json out = ToJson(*figures, config);
    out["iperf3_runs_mib_per_s"] = {JsonNumber(MiBps(loopback)),
                                    JsonNumber(MiBps(loopback_after))};
    out["host"] = {{"load_average_1m_before", JsonNumber(host.load_before)},
                   {"load_average_1m_after", JsonNumber(host.load_after)},
                   {"others_cores", host.others_cores()},
                   {"busy", host.busy()}};
    std::cout << out.dump(2) << std::endl;
  }
  return 0;
}

}  // namespace
}  // namespace bench
}  // namespace shardps

int main(int argc, char** argv) { return shardps::bench::Main(argc, argv); }
