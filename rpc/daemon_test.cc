#include "rpc/daemon.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/server_credentials.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"
#include "rpc/test_pki.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

constexpr char kWorkerConfig[] =
    R"(--tf_config={"cluster": {"chief": ["localhost:2000"], "ps": ["localhost:2001"],
                    "worker": ["localhost:2002"]}, "task": {"type": "worker", "index": 0}})";
constexpr char kChiefConfig[] =
    R"(--tf_config={"cluster": {"chief": ["localhost:2000"], "ps": ["localhost:2001"]},
                    "task": {"type": "chief", "index": 0}})";

// As a daemon's main() does, before any thread starts (here: before main()), so that SIGTERM
// stays pending until a Daemon's signal watcher takes it.
const bool kSignalsBlocked = [] {
  Daemon::BlockTerminationSignals();
  return true;
}();

// Daemon::Init over `args` (argv[0] added).
int InitDaemon(Daemon* daemon, std::vector<std::string> args) {
  args.insert(args.begin(), "daemon_test");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return daemon->Init(static_cast<int>(argv.size()), argv.data());
}

TEST(DaemonTest, ExitCodesAreTheDocumentedOnes) {
  EXPECT_EQ(kExitDone, 0);
  EXPECT_EQ(kExitError, 1);
  EXPECT_EQ(kExitBadConfig, 2);
  EXPECT_EQ(kExitJobFailed, 4);
  EXPECT_EQ(kExitInterrupted, 5);
  EXPECT_EQ(kExitOrphaned, 6);
}

TEST(DaemonTest, WithoutContactFromTheChiefItStopsOrphaned) {
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0.2"}), -1);
  EXPECT_EQ(daemon.orphan_timeout(), absl::Milliseconds(200));
  // No bound on how long the watch takes to notice; only that it does, and why.
  daemon.WaitForStop();
  EXPECT_EQ(daemon.stop_cause(), StopCause::kOrphaned);
  EXPECT_EQ(daemon.StopExitCode(), kExitOrphaned);
}

TEST(DaemonTest, SigtermStopsTheDaemonForARestart) {
  ASSERT_TRUE(kSignalsBlocked);
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0"}), -1);
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  ASSERT_TRUE(daemon.WaitForStopWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(daemon.stop_cause(), StopCause::kSignal);
  EXPECT_EQ(daemon.StopExitCode(), kExitInterrupted);
}

TEST(DaemonTest, SigtermToAnIdleLongLivedDaemonExitsZero) {
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--long_lived"}), -1);
  bool idle = true;
  daemon.set_idle_check([&idle] { return idle; });
  ASSERT_EQ(kill(getpid(), SIGINT), 0);
  ASSERT_TRUE(daemon.WaitForStopWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(daemon.stop_cause(), StopCause::kSignal);
  EXPECT_EQ(daemon.StopExitCode(), kExitDone);
  idle = false;
  EXPECT_EQ(daemon.StopExitCode(), kExitInterrupted);
}

// A destroyed Daemon has joined its signal thread: a later signal goes to the Daemon that
// runs then, not to a thread left behind.
TEST(DaemonTest, ADestroyedDaemonTakesNoMoreSignals) {
  for (int i = 0; i < 3; ++i) {
    FlagParser flags("worker", "test");
    Daemon gone("worker", &flags, /*serves=*/false);
    ASSERT_EQ(InitDaemon(&gone, {kWorkerConfig, "--orphan_timeout_s=0"}), -1);
  }
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0"}), -1);
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  ASSERT_TRUE(daemon.WaitForStopWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(daemon.stop_cause(), StopCause::kSignal);
}

TEST(DaemonTest, TheFirstStopCauseIsKept) {
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0.05"}), -1);
  daemon.RequestStop("job done", /*from_rpc=*/true);
  ASSERT_TRUE(daemon.WaitForStopWithTimeout(absl::ZeroDuration()));
  // The orphan watch has nothing left to do: the stop stays a request, exit 0.
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(daemon.stop_cause(), StopCause::kRequest);
  EXPECT_EQ(daemon.StopExitCode(), kExitDone);
}

TEST(DaemonTest, ZeroOrLongLivedTurnsTheOrphanWatchOff) {
  {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags, /*serves=*/false);
    ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0"}), -1);
    EXPECT_EQ(daemon.orphan_timeout(), absl::ZeroDuration());
    EXPECT_FALSE(daemon.WaitForStopWithTimeout(absl::Milliseconds(50)));
  }
  {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags, /*serves=*/false);
    ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0.01", "--long_lived"}), -1);
    EXPECT_EQ(daemon.orphan_timeout(), absl::ZeroDuration());
    EXPECT_FALSE(daemon.WaitForStopWithTimeout(absl::Milliseconds(50)));
    EXPECT_EQ(daemon.stop_cause(), StopCause::kNone);
  }
}

TEST(DaemonTest, DefaultOrphanTimeoutIsAnHour) {
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig}), -1);
  EXPECT_EQ(daemon.orphan_timeout(), absl::Hours(1));
}

TEST(DaemonTest, TheChiefHasNoOrphanTimeout) {
  FlagParser flags("chief", "test");
  Daemon daemon("chief", &flags);
  EXPECT_EQ(InitDaemon(&daemon, {kChiefConfig, "--orphan_timeout_s=5"}), kExitBadConfig);
  FlagParser flags2("chief", "test");
  Daemon daemon2("chief", &flags2);
  ASSERT_EQ(InitDaemon(&daemon2, {kChiefConfig}), -1);
  EXPECT_EQ(daemon2.orphan_timeout(), absl::ZeroDuration());
}

TEST(DaemonTest, BadCommonFlagValuesExitTwo) {
  for (const char* bad : {"--orphan_timeout_s=-1", "--orphan_timeout_s=nan",
                          "--max_request_bytes=-1", "--max_request_bytes=4294967296",
                          "--test_protocol_version=x", "--health_port=-1",
                          "--health_port=65536"}) {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    EXPECT_EQ(InitDaemon(&daemon, {kWorkerConfig, bad}), kExitBadConfig) << bad;
  }
}

TEST(DaemonTest, BadTlsFlagsExitTwo) {
  for (const char* bad : {"--tls_cert_file=/nonexistent.crt", "--tls_key_file=/k.key",
                          "--tls_client_auth", "--tls_ca_file=/nonexistent/ca.crt",
                          "--tls_refresh_s=0"}) {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    EXPECT_EQ(InitDaemon(&daemon, {kWorkerConfig, bad}), kExitBadConfig) << bad;
  }
}

TEST(DaemonTest, BadAuthFlagsExitTwo) {
  // Token files need TLS, and must be readable.
  for (const char* bad : {"--auth_tokens_file=/nonexistent/tokens",
                          "--auth_token_file=/nonexistent/token"}) {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    EXPECT_EQ(InitDaemon(&daemon, {kWorkerConfig, bad}), kExitBadConfig) << bad;
  }
}

// The binding rule, by the address bound: plaintext beyond loopback needs --insecure.
TEST(DaemonTest, PlaintextBeyondLoopbackIsRefusedWithoutInsecure) {
  {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig}), -1);
    EXPECT_EQ(daemon.ServeAt("0.0.0.0:0", {}), nullptr);
    EXPECT_EQ(daemon.serve_exit_code(), kExitBadConfig);
    // Loopback, by number or by name, needs no TLS.
    std::unique_ptr<grpc::Server> loopback = daemon.ServeAt("127.0.0.1:0", {});
    ASSERT_NE(loopback, nullptr);
    loopback->Shutdown();
    std::unique_ptr<grpc::Server> local = daemon.ServeAt("localhost:0", {});
    ASSERT_NE(local, nullptr);
    local->Shutdown();
  }
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--insecure"}), -1);
  std::unique_ptr<grpc::Server> server = daemon.ServeAt("0.0.0.0:0", {});
  ASSERT_NE(server, nullptr);
  server->Shutdown();
}

TEST(DaemonTest, MaxRequestBytesDefaultsPerDaemonAndTheFlagWins) {
  const std::string ps_config =
      R"(--tf_config={"cluster": {"ps": ["localhost:2001"]}, "task": {"type": "ps", "index": 0}})";
  {
    FlagParser flags("ps", "test");
    Daemon daemon("ps", &flags);
    ASSERT_EQ(InitDaemon(&daemon, {ps_config}), -1);
    EXPECT_EQ(daemon.max_request_bytes(), 16 << 20);
  }
  {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig}), -1);
    EXPECT_EQ(daemon.max_request_bytes(), 4 << 20);
  }
  {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    daemon.set_default_max_request_bytes(1 << 20);
    ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig}), -1);
    EXPECT_EQ(daemon.max_request_bytes(), 1 << 20);
  }
  {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    daemon.set_default_max_request_bytes(1 << 20);
    ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--max_request_bytes=12345"}), -1);
    EXPECT_EQ(daemon.max_request_bytes(), 12345);
  }
}

TEST(DaemonTest, OptionalConfigMayBeAbsentButNotBad) {
  unsetenv("TF_CONFIG");
  {
    FlagParser flags("evaluator", "test");
    Daemon daemon("evaluator", &flags, /*serves=*/false);
    daemon.set_config_optional();
    ASSERT_EQ(InitDaemon(&daemon, {"--orphan_timeout_s=0"}), -1);
    EXPECT_FALSE(daemon.has_config());
  }
  {
    FlagParser flags("evaluator", "test");
    Daemon daemon("evaluator", &flags, /*serves=*/false);
    daemon.set_config_optional();
    EXPECT_EQ(InitDaemon(&daemon, {"--tf_config={not json"}), kExitBadConfig);
  }
  {
    FlagParser flags("worker", "test");
    Daemon daemon("worker", &flags);
    EXPECT_EQ(InitDaemon(&daemon, {}), kExitBadConfig);  // required by default
  }
}

// Answers StartJob with OK, whatever it carries.
class AcceptingWorkerService : public WorkerService::CallbackService {
 public:
  grpc::ServerUnaryReactor* StartJob(grpc::CallbackServerContext* ctx, const StartJobRequest*,
                                     StartJobResponse*) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

// A real server with the daemons' settings and a 1 MiB request cap, on a port of its own.
class RequestCapTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    Daemon::ConfigureBuilder(&builder, kCap);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_GT(port_, 0);
    stub_ = WorkerService::NewStub(NewChannel(absl::StrCat("127.0.0.1:", port_)));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  // StartJob with a job name of `bytes` bytes.
  grpc::Status StartJobOf(size_t bytes) {
    StartJobRequest request;
    request.mutable_job()->set_name(std::string(bytes, 'x'));
    StartJobResponse response;
    grpc::ClientContext ctx;
    AttachProtocolVersion(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    return stub_->StartJob(&ctx, request, &response);
  }

  static constexpr int64_t kCap = 1 << 20;
  AcceptingWorkerService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WorkerService::Stub> stub_;
};

TEST_F(RequestCapTest, OversizedRequestIsResourceExhaustedNamingTheLimit) {
  grpc::Status status = StartJobOf(2 << 20);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr(absl::StrCat(kCap))) << status.error_message();
  // The server is none the worse for it.
  EXPECT_TRUE(StartJobOf(1000).ok());
}

TEST_F(RequestCapTest, RequestUnderTheCapSucceeds) {
  grpc::Status status = StartJobOf(kCap - 1024);
  EXPECT_TRUE(status.ok()) << status.error_code() << ": " << status.error_message();
}

TEST(RequestCapNoLimitTest, ZeroAcceptsLargeRequests) {
  grpc::ServerBuilder builder;
  Daemon::ConfigureBuilder(&builder, 0);
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  AcceptingWorkerService service;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto stub = WorkerService::NewStub(NewChannel(absl::StrCat("127.0.0.1:", port)));
  StartJobRequest request;
  request.mutable_job()->set_name(std::string(8 << 20, 'x'));  // over gRPC's own 4 MiB default
  StartJobResponse response;
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status status = stub->StartJob(&ctx, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  server->Shutdown();
}

// A port nothing listens on now (the kernel's choice, released).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  socklen_t length = sizeof(address);
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

std::string Scrape(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
    send(fd, request.data(), request.size(), 0);
    char buffer[4096];
    for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, n);
  }
  close(fd);
  return answer;
}

TEST(DaemonTest, MetricsPortServesTheRegistry) {
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  const int port = FreePort();
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0",
                                 absl::StrCat("--metrics_port=", port)}),
            -1);
  auto steps = daemon.metrics()->AddCounter("shardps_test_steps_total", "steps", {});
  ASSERT_TRUE(steps.ok());
  steps->With({})->Add(7);
  ASSERT_EQ(daemon.StartMetrics(), -1);
  EXPECT_EQ(daemon.metrics_port(), port);
  EXPECT_THAT(Scrape(port), HasSubstr("\nshardps_test_steps_total 7\n"));
  daemon.StopMetrics();
  EXPECT_EQ(daemon.metrics_port(), 0);
  EXPECT_EQ(Scrape(port), "");
}

TEST(DaemonTest, MetricsPortOffByDefault) {
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0"}), -1);
  EXPECT_EQ(daemon.StartMetrics(), -1);
  EXPECT_EQ(daemon.metrics_port(), 0);
}

TEST(DaemonTest, PlaintextMetricsBeyondLoopbackNeedInsecure) {
  FlagParser flags("chief", "test");
  Daemon daemon("chief", &flags);
  ASSERT_EQ(InitDaemon(&daemon, {kChiefConfig, "--bind_host=0.0.0.0",
                                 absl::StrCat("--metrics_port=", FreePort())}),
            -1);
  EXPECT_EQ(daemon.StartMetrics(), kExitBadConfig);
  EXPECT_EQ(daemon.metrics_port(), 0);

  FlagParser insecure_flags("chief", "test");
  Daemon insecure("chief", &insecure_flags);
  ASSERT_EQ(InitDaemon(&insecure, {kChiefConfig, "--bind_host=0.0.0.0", "--insecure",
                                   absl::StrCat("--metrics_port=", FreePort())}),
            -1);
  EXPECT_EQ(insecure.StartMetrics(), -1);
  EXPECT_GT(insecure.metrics_port(), 0);
}

// GET /metrics over TLS, presenting `cert` when given; "" when the handshake fails.
std::string ScrapeTls(int port, const std::string& ca, const std::string& cert,
                      const std::string& key) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL_CTX_load_verify_locations(ctx, ca.c_str(), nullptr);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  if (!cert.empty()) {
    SSL_CTX_use_certificate_chain_file(ctx, cert.c_str());
    SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM);
  }
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string answer;
  SSL* ssl = SSL_new(ctx);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) {
    SSL_set_fd(ssl, fd);
    if (SSL_connect(ssl) == 1) {
      const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
      SSL_write(ssl, request.data(), static_cast<int>(request.size()));
      char buffer[4096];
      for (int n; (n = SSL_read(ssl, buffer, sizeof(buffer))) > 0;) answer.append(buffer, n);
    }
  }
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  close(fd);
  return answer;
}

TEST(DaemonTest, MetricsUseTheDaemonsTlsAndClientCertificates) {
  TestPki pki(std::getenv("TEST_TMPDIR"), "metrics_ca");
  pki.Issue("metrics_server");
  pki.Issue("scraper");
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  const int port = FreePort();
  ASSERT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--orphan_timeout_s=0",
                                 absl::StrCat("--metrics_port=", port),
                                 "--tls_cert_file=" + pki.cert("metrics_server"),
                                 "--tls_key_file=" + pki.key("metrics_server"),
                                 "--tls_ca_file=" + pki.ca_file(), "--tls_client_auth"}),
            -1);
  ASSERT_EQ(daemon.StartMetrics(), -1);
  EXPECT_EQ(ScrapeTls(port, pki.ca_file(), "", ""), "");  // no client certificate
  EXPECT_EQ(Scrape(port).find("200 OK"), std::string::npos);  // plaintext
  const std::string answer =
      ScrapeTls(port, pki.ca_file(), pki.cert("scraper"), pki.key("scraper"));
  EXPECT_THAT(answer, HasSubstr("HTTP/1.1 200 OK"));
  EXPECT_THAT(answer, HasSubstr("shardps_certificate_expiry_seconds{file=\"cert\",path=\"" +
                                pki.cert("metrics_server") + "\"} "));
  EXPECT_THAT(answer, HasSubstr("shardps_certificate_expiry_seconds{file=\"ca\","));
  daemon.StopMetrics();
  SetProcessTls(TlsOptions());  // the other tests' channels are plaintext
}

TEST(DaemonTest, MetricsPortOutOfRangeIsABadCommandLine) {
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags, /*serves=*/false);
  EXPECT_EQ(InitDaemon(&daemon, {kWorkerConfig, "--metrics_port=70000"}), kExitBadConfig);
}

}  // namespace
}  // namespace shardps
