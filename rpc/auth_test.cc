// Roles over real TLS connections: a gated test service on 127.0.0.1, clients with
// certificates naming roles, tokens, certificates of another CA, expired ones, none.
#include "rpc/auth.h"

#include <atomic>
#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/test_files.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/call_gate.h"
#include "rpc/protocol.h"
#include "rpc/test_pki.h"
#include "rpc/tls.h"

namespace shardps {
namespace {

// A PsService whose Push and Shutdown pass the gate and count the calls that got through.
class GatedService : public PsService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const PushRequest*,
                                 PushResponse*) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Push")) {
      return rejected;
    }
    ++pushes;
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx, const ShutdownRequest*,
                                     ShutdownResponse*) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Shutdown")) {
      return rejected;
    }
    ++shutdowns;
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  std::atomic<int> pushes{0};
  std::atomic<int> shutdowns{0};
};

class Server {
 public:
  explicit Server(const TlsOptions& options) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", ServerCredentialsFor(options), &port_);
    builder.RegisterService(&service);
    server_ = builder.BuildAndStart();
  }
  ~Server() {
    if (server_ != nullptr) server_->Shutdown();
  }
  int port() const { return port_; }
  GatedService service;

 private:
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// A fresh channel (no connection reused) with `creds`.
std::unique_ptr<PsService::Stub> Stub(int port, std::shared_ptr<grpc::ChannelCredentials> creds) {
  grpc::ChannelArguments args;
  static std::atomic<int> fresh{0};
  args.SetInt("shardps.test_fresh", ++fresh);
  return PsService::NewStub(
      grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), creds, args));
}

grpc::StatusCode Call(PsService::Stub* stub, const std::string& method) {
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (method == "Push") {
    PushResponse response;
    return stub->Push(&ctx, PushRequest(), &response).error_code();
  }
  ShutdownResponse response;
  return stub->Shutdown(&ctx, ShutdownRequest(), &response).error_code();
}

std::string WriteFile(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  return path;
}

constexpr char kWorkerToken[] = "worker-token-0123456789abcdef";
constexpr char kChiefToken[] = "chief-token-0123456789abcdefgh";

class AuthTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(FreshTestDir("auth"));
    ca_ = new TestPki(*dir_, "ca");
    other_ca_ = new TestPki(*dir_, "other_ca");
    ca_->Issue("server", {.uri = "spiffe://shardps/ps/0"});
    ca_->Issue("worker", {.uri = "spiffe://shardps/worker/3"});
    ca_->Issue("chief", {.uri = "spiffe://shardps/chief"});
    ca_->Issue("nobody");
    ca_->Issue("expired", {.uri = "spiffe://shardps/chief/0", .expired = true});
    other_ca_->Issue("stranger", {.uri = "spiffe://shardps/chief/0"});
    tokens_ = new std::string(WriteFile(
        *dir_ + "/tokens", absl::StrCat("# role tokens\n", kWorkerToken, " worker\n\n",
                                        kChiefToken, "   chief  # the chief\n")));
  }
  void TearDown() override { ResetProcessAuthForTesting(); }

  // Server-side settings: mutual TLS, optionally the tokens file.
  TlsOptions ServeWith(bool client_auth, bool tokens) {
    TlsOptions tls = ca_->Options("server");
    tls.client_auth = client_auth;
    AuthOptions auth;
    if (tokens) auth.tokens_file = *tokens_;
    EXPECT_TRUE(SetProcessAuth(auth, tls).ok());
    return tls;
  }
  static std::shared_ptr<grpc::ChannelCredentials> As(const std::string& name) {
    return ChannelCredentialsFor(ca_->Options(name));
  }
  static std::shared_ptr<grpc::ChannelCredentials> WithToken(const std::string& token) {
    return grpc::CompositeChannelCredentials(ChannelCredentialsFor(ca_->Options("")),
                                             grpc::AccessTokenCredentials(token));
  }

  static std::string* dir_;
  static TestPki* ca_;
  static TestPki* other_ca_;
  static std::string* tokens_;
};
std::string* AuthTest::dir_ = nullptr;
TestPki* AuthTest::ca_ = nullptr;
TestPki* AuthTest::other_ca_ = nullptr;
std::string* AuthTest::tokens_ = nullptr;

TEST_F(AuthTest, CertificatesNameTheRoleAndTheTableDecides) {
  Server server(ServeWith(/*client_auth=*/true, /*tokens=*/false));
  ASSERT_NE(server.port(), 0);
  EXPECT_TRUE(ProcessEnforcesRoles());
  auto worker = Stub(server.port(), As("worker"));
  EXPECT_EQ(Call(worker.get(), "Push"), grpc::StatusCode::OK);
  EXPECT_EQ(Call(worker.get(), "Shutdown"), grpc::StatusCode::PERMISSION_DENIED);
  auto chief = Stub(server.port(), As("chief"));
  EXPECT_EQ(Call(chief.get(), "Shutdown"), grpc::StatusCode::OK);
  // A certificate of the CA that names no role.
  auto nobody = Stub(server.port(), As("nobody"));
  EXPECT_EQ(Call(nobody.get(), "Push"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(server.service.pushes.load(), 1);
  EXPECT_EQ(server.service.shutdowns.load(), 1);
}

TEST_F(AuthTest, WithoutAGoodCertificateNoCallGetsThrough) {
  Server server(ServeWith(/*client_auth=*/true, /*tokens=*/false));
  ASSERT_NE(server.port(), 0);
  // No client certificate, one of another CA, an expired one: refused at the handshake.
  auto none = Stub(server.port(), As(""));
  EXPECT_NE(Call(none.get(), "Push"), grpc::StatusCode::OK);
  TlsOptions stranger = ca_->Options("");
  stranger.cert_file = other_ca_->cert("stranger");
  stranger.key_file = other_ca_->key("stranger");
  auto other = Stub(server.port(), ChannelCredentialsFor(stranger));
  EXPECT_NE(Call(other.get(), "Shutdown"), grpc::StatusCode::OK);
  auto expired = Stub(server.port(), As("expired"));
  EXPECT_NE(Call(expired.get(), "Shutdown"), grpc::StatusCode::OK);
  auto plaintext = Stub(server.port(), grpc::InsecureChannelCredentials());
  EXPECT_NE(Call(plaintext.get(), "Shutdown"), grpc::StatusCode::OK);
  EXPECT_EQ(server.service.pushes.load(), 0);
  EXPECT_EQ(server.service.shutdowns.load(), 0);
}

TEST_F(AuthTest, TokensNameTheRoleAndAWrongOneIsRefused) {
  Server server(ServeWith(/*client_auth=*/false, /*tokens=*/true));
  ASSERT_NE(server.port(), 0);
  EXPECT_TRUE(ProcessEnforcesRoles());
  auto worker = Stub(server.port(), WithToken(kWorkerToken));
  EXPECT_EQ(Call(worker.get(), "Push"), grpc::StatusCode::OK);
  EXPECT_EQ(Call(worker.get(), "Shutdown"), grpc::StatusCode::PERMISSION_DENIED);
  auto wrong = Stub(server.port(), WithToken("not-a-token-of-this-server"));
  EXPECT_EQ(Call(wrong.get(), "Push"), grpc::StatusCode::UNAUTHENTICATED);
  auto none = Stub(server.port(), As(""));
  EXPECT_EQ(Call(none.get(), "Push"), grpc::StatusCode::UNAUTHENTICATED);
  // A token outranks the certificate: a chief certificate with a worker token is a worker.
  auto mixed = Stub(server.port(), grpc::CompositeChannelCredentials(
                                       As("chief"), grpc::AccessTokenCredentials(kWorkerToken)));
  EXPECT_EQ(Call(mixed.get(), "Shutdown"), grpc::StatusCode::PERMISSION_DENIED);
  auto chief = Stub(server.port(), WithToken(kChiefToken));
  EXPECT_EQ(Call(chief.get(), "Shutdown"), grpc::StatusCode::OK);
  EXPECT_EQ(server.service.pushes.load(), 1);
  EXPECT_EQ(server.service.shutdowns.load(), 1);
}

TEST_F(AuthTest, RolesAreOffWithoutClientAuthOrTokens) {
  Server server(ServeWith(/*client_auth=*/false, /*tokens=*/false));
  ASSERT_NE(server.port(), 0);
  EXPECT_FALSE(ProcessEnforcesRoles());
  EXPECT_NE(DescribeProcessAuth().find("roles off"), std::string::npos);
  auto anyone = Stub(server.port(), As(""));
  EXPECT_EQ(Call(anyone.get(), "Shutdown"), grpc::StatusCode::OK);
}

TEST_F(AuthTest, TheProcessTokenIsSentOnEveryChannel) {
  Server server(ServeWith(/*client_auth=*/false, /*tokens=*/true));
  ASSERT_NE(server.port(), 0);
  // This process as a client: its TLS and its token, as a daemon's main() sets them.
  TlsOptions client_tls = ca_->Options("");
  SetProcessTls(client_tls);
  AuthOptions client;
  client.tokens_file = *tokens_;  // the same process serves too
  client.token_file = WriteFile(*dir_ + "/my-token", absl::StrCat(kChiefToken, "\n"));
  TlsOptions serving = ca_->Options("server");
  ASSERT_TRUE(SetProcessAuth(client, serving).ok());
  auto stub = Stub(server.port(), ProcessChannelCredentials());
  EXPECT_EQ(Call(stub.get(), "Shutdown"), grpc::StatusCode::OK);
  SetProcessTls(TlsOptions());
}

TEST_F(AuthTest, BadTokenFilesAreRefusedNamingTheLine) {
  TlsOptions tls = ca_->Options("server");
  auto check = [&](const std::string& text) {
    AuthOptions auth;
    auth.tokens_file = WriteFile(*dir_ + "/bad-tokens", text);
    return std::string(auth.Validate(tls).message());
  };
  EXPECT_NE(check("").find("no token"), std::string::npos);
  EXPECT_NE(check("# only a comment\n").find("no token"), std::string::npos);
  EXPECT_NE(check("abcdefabcdefabcdef root\n").find("line 1: unknown role \"root\""),
            std::string::npos);
  EXPECT_NE(check("\nshort worker\n").find("line 2: the token is 5 characters"),
            std::string::npos);
  EXPECT_NE(check("abcdefabcdefabcdef\n").find("expected \"TOKEN ROLE\""), std::string::npos);
  EXPECT_NE(check("abcdefabcdefabcdef worker\nabcdefabcdefabcdef chief\n").find("listed twice"),
            std::string::npos);
  AuthOptions missing;
  missing.tokens_file = *dir_ + "/no-such-file";
  EXPECT_NE(missing.Validate(tls).message().find("cannot read"), absl::string_view::npos);
  // Tokens need TLS, on both sides.
  AuthOptions plaintext;
  plaintext.tokens_file = *tokens_;
  EXPECT_NE(plaintext.Validate(TlsOptions()).message().find("needs TLS"),
            absl::string_view::npos);
  AuthOptions client;
  client.token_file = WriteFile(*dir_ + "/t", kWorkerToken);
  EXPECT_NE(client.Validate(TlsOptions()).message().find("never sent in plaintext"),
            absl::string_view::npos);
  client.token_file = WriteFile(*dir_ + "/empty-token", "\n");
  EXPECT_NE(client.Validate(ca_->Options("")).message().find("holds no token"),
            absl::string_view::npos);
}

TEST(RoleFromSpiffeUriTest, ReadsTheRoleAndNothingElse) {
  EXPECT_EQ(RoleFromSpiffeUri("spiffe://shardps/worker/3"), Role::kWorker);
  EXPECT_EQ(RoleFromSpiffeUri("spiffe://shardps/admin"), Role::kAdmin);
  EXPECT_EQ(RoleFromSpiffeUri("spiffe://shardps/root/0"), std::nullopt);
  EXPECT_EQ(RoleFromSpiffeUri("spiffe://other/worker/0"), std::nullopt);
  EXPECT_EQ(RoleFromSpiffeUri("spiffe://shardps/worker/"), std::nullopt);
  EXPECT_EQ(RoleFromSpiffeUri("spiffe://shardps/worker/0/x"), std::nullopt);
  EXPECT_EQ(RoleFromSpiffeUri("https://shardps/worker/0"), std::nullopt);
}

}  // namespace
}  // namespace shardps
