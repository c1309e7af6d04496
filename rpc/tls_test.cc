#include "rpc/tls.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/test_files.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "rpc/health_service.h"
#include "rpc/test_pki.h"

namespace shardps {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// A health-only gRPC server on 127.0.0.1 with `options`' credentials.
class Server {
 public:
  explicit Server(const TlsOptions& options) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(options), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
  }
  ~Server() {
    if (server_ != nullptr) server_->Shutdown();
  }
  int port() const { return port_; }

 private:
  HealthOnlyService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// One health check on a fresh channel (no connection reused) with `options`' credentials.
grpc::Status Check(int port, const TlsOptions& options) {
  grpc::ChannelArguments args;
  args.SetInt("shardps.test_fresh", static_cast<int>(absl::ToUnixNanos(absl::Now()) & 0x7fffffff));
  auto stub = Health::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                        ChannelCredentialsFor(options), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  HealthCheckRequest request;
  HealthCheckResponse response;
  return stub->Check(&ctx, request, &response);
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(FreshTestDir("tls"));
    ca_ = new TestPki(*dir_, "ca");
    other_ca_ = new TestPki(*dir_, "other_ca");
    ca_->Issue("server");
    ca_->Issue("client");
    other_ca_->Issue("stranger");
  }
  static std::string* dir_;
  static TestPki* ca_;
  static TestPki* other_ca_;
};
std::string* TlsTest::dir_ = nullptr;
TestPki* TlsTest::ca_ = nullptr;
TestPki* TlsTest::other_ca_ = nullptr;

TEST_F(TlsTest, AClientThatTrustsTheCaTalksToTheServerAndOthersDoNot) {
  Server server(ca_->Options("server"));
  ASSERT_NE(server.port(), 0);
  EXPECT_TRUE(Check(server.port(), ca_->Options("")).ok());
  // Plaintext to a TLS server, and a client that trusts another CA: refused.
  EXPECT_FALSE(Check(server.port(), TlsOptions()).ok());
  EXPECT_FALSE(Check(server.port(), other_ca_->Options("")).ok());
  // A client certificate from another CA is refused even without --tls_client_auth.
  TlsOptions stranger = ca_->Options("");
  stranger.cert_file = other_ca_->cert("stranger");
  stranger.key_file = other_ca_->key("stranger");
  EXPECT_FALSE(Check(server.port(), stranger).ok());
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateOfTheCa) {
  TlsOptions options = ca_->Options("server");
  options.client_auth = true;
  Server server(options);
  ASSERT_NE(server.port(), 0);
  EXPECT_FALSE(Check(server.port(), ca_->Options("")).ok());
  EXPECT_TRUE(Check(server.port(), ca_->Options("client")).ok());
  TlsOptions stranger = ca_->Options("");
  stranger.cert_file = other_ca_->cert("stranger");
  stranger.key_file = other_ca_->key("stranger");
  EXPECT_FALSE(Check(server.port(), stranger).ok());
}

TEST_F(TlsTest, ARotatedCertificateIsTakenWithoutARestartAndAHalfWrittenOneIsNot) {
  // The server's files live in a directory of their own, replaced as cert-manager does.
  const std::string live = *dir_ + "/live";
  ShellOrFail(absl::StrCat("mkdir -p ", live, " && cp ", ca_->cert("server"), " ", live,
                           "/tls.crt && cp ", ca_->key("server"), " ", live, "/tls.key"));
  // The CA bundle holds both CAs, so that a certificate of either verifies.
  ShellOrFail(
      absl::StrCat("cat ", ca_->ca_file(), " ", other_ca_->ca_file(), " > ", live, "/ca.crt"));
  TlsOptions options;
  options.cert_file = live + "/tls.crt";
  options.key_file = live + "/tls.key";
  options.ca_file = live + "/ca.crt";
  options.refresh_s = 1;
  Server server(options);
  ASSERT_NE(server.port(), 0);
  EXPECT_TRUE(Check(server.port(), ca_->Options("")).ok());
  EXPECT_FALSE(Check(server.port(), other_ca_->Options("")).ok());

  // Half written: a new certificate beside the old key (they do not match): not taken.
  other_ca_->Issue("rotated");
  ShellOrFail(absl::StrCat("cp ", other_ca_->cert("rotated"), " ", live, "/tls.crt.new && mv ",
                           live, "/tls.crt.new ", live, "/tls.crt"));
  absl::SleepFor(absl::Milliseconds(2500));
  EXPECT_TRUE(Check(server.port(), ca_->Options("")).ok()) << "a mismatched pair was taken";

  // The key follows: the new pair is served from then on.
  ShellOrFail(absl::StrCat("cp ", other_ca_->key("rotated"), " ", live, "/tls.key.new && mv ",
                           live, "/tls.key.new ", live, "/tls.key"));
  bool rotated = false;
  for (int tries = 0; tries < 40 && !rotated; ++tries) {
    absl::SleepFor(absl::Milliseconds(250));
    rotated = Check(server.port(), other_ca_->Options("")).ok();
  }
  EXPECT_TRUE(rotated) << "the rotated certificate was not served within 10 s";
  EXPECT_FALSE(Check(server.port(), ca_->Options("")).ok());
}

TEST_F(TlsTest, BadOptionsNameWhatIsWrong) {
  TlsOptions o = ca_->Options("server");
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  TlsOptions no_key = o;
  no_key.key_file.clear();
  EXPECT_TRUE(absl::StrContains(no_key.Validate().message(), "--tls_key_file")) << no_key.Validate();
  TlsOptions no_ca = o;
  no_ca.ca_file.clear();
  EXPECT_TRUE(absl::StrContains(no_ca.Validate().message(), "--tls_ca_file")) << no_ca.Validate();
  TlsOptions missing = o;
  missing.ca_file = *dir_ + "/nope.crt";
  EXPECT_TRUE(absl::StrContains(missing.Validate().message(), "nope.crt")) << missing.Validate();
  TlsOptions not_pem = o;
  not_pem.cert_file = *dir_ + "/server.ext";
  EXPECT_TRUE(absl::StrContains(not_pem.Validate().message(), "no PEM block")) << not_pem.Validate();
  TlsOptions auth = TlsOptions();
  auth.client_auth = true;
  EXPECT_TRUE(absl::StrContains(auth.Validate().message(), "--tls_client_auth"));
  TlsOptions mismatched = o;
  mismatched.key_file = ca_->key("client");
  EXPECT_TRUE(absl::StrContains(mismatched.Validate().message(), "not a pair"))
      << mismatched.Validate();
  TlsOptions refresh = o;
  refresh.refresh_s = 0;
  EXPECT_TRUE(absl::StrContains(refresh.Validate().message(), "--tls_refresh_s"));
}

TEST_F(TlsTest, TheEnvironmentGivesDefaultsThatFlagsOverride) {
  setenv("SHARDPS_TLS_CA_FILE", ca_->ca_file().c_str(), 1);
  setenv("SHARDPS_TLS_REFRESH_S", "7", 1);
  {
    TlsOptions o;
    FlagParser flags("t", "t");
    o.AddFlags(&flags);
    ASSERT_TRUE(flags.Parse({"--tls_refresh_s=9"}, nullptr).ok());
    EXPECT_EQ(o.ca_file, ca_->ca_file());
    EXPECT_EQ(o.refresh_s, 9);
    EXPECT_TRUE(o.Validate().ok()) << o.Validate();
  }
  setenv("SHARDPS_TLS_CLIENT_AUTH", "maybe", 1);
  {
    TlsOptions o;
    FlagParser flags("t", "t");
    o.AddFlags(&flags);
    EXPECT_TRUE(absl::StrContains(o.Validate().message(), "SHARDPS_TLS_CLIENT_AUTH=maybe"));
  }
  unsetenv("SHARDPS_TLS_CA_FILE");
  unsetenv("SHARDPS_TLS_REFRESH_S");
  unsetenv("SHARDPS_TLS_CLIENT_AUTH");
}

TEST(TlsBindingTest, PlaintextBeyondLoopbackNeedsInsecure) {
  TlsOptions plain;
  EXPECT_TRUE(CheckBinding("127.0.0.5:5000", plain).ok());
  EXPECT_TRUE(CheckBinding("localhost:5000", plain).ok());
  EXPECT_TRUE(CheckBinding("[::1]:5000", plain).ok());
  const absl::Status wide = CheckBinding("0.0.0.0:5000", plain);
  EXPECT_EQ(wide.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(wide.message(), "0.0.0.0:5000")) << wide;
  EXPECT_TRUE(absl::StrContains(wide.message(), "--insecure")) << wide;
  EXPECT_FALSE(CheckBinding("10.1.2.3:5000", plain).ok());
  EXPECT_FALSE(CheckBinding("[::]:5000", plain).ok());
  plain.insecure = true;
  EXPECT_TRUE(CheckBinding("0.0.0.0:5000", plain).ok());
  TlsOptions tls;
  tls.cert_file = "c";
  tls.key_file = "k";
  EXPECT_TRUE(CheckBinding("0.0.0.0:5000", tls).ok());
}

}  // namespace
}  // namespace shardps
