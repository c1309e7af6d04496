// A real ps daemon with TLS, roles (certificates and tokens) and a data root, attacked by
// every kind of caller the issue names: no identity, a wrong token, a worker calling the
// chief's calls, a reader pushing, the chief naming paths outside the data root. Every
// refused call changes nothing: the parameters pulled before and after are equal, the ps still
// runs, and a rotated server certificate is used without a restart.
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/protocol.h"
#include "rpc/test_pki.h"
#include "rpc/tls.h"
#include "tests/process.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

constexpr char kWorkerToken[] = "worker-token-9f8e7d6c5b4a3210";
constexpr char kReaderToken[] = "reader-token-0a1b2c3d4e5f6789";

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A directory per test: the process's TLS settings watch their files by path.
    dir_ = FreshTempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    ASSERT_EQ(::mkdir(dir_.c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir_ + "/root").c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((dir_ + "/outside").c_str(), 0755), 0);
    ASSERT_EQ(::symlink((dir_ + "/outside").c_str(), (dir_ + "/root/escape").c_str()), 0);
    address_ = LoopbackAddress();
    const std::string ip = address_.substr(0, address_.rfind(':'));
    pki_ = std::make_unique<TestPki>(dir_, "ca");
    other_ca_ = std::make_unique<TestPki>(dir_, "other_ca");
    pki_->Issue("ps", {.uri = "spiffe://shardps/ps/0", .extra_sans = "IP:" + ip});
    other_ca_->Issue("ps-rotated", {.uri = "spiffe://shardps/ps/0", .extra_sans = "IP:" + ip});
    pki_->Issue("chief", {.uri = "spiffe://shardps/chief/0"});
    pki_->Issue("worker", {.uri = "spiffe://shardps/worker/0"});
    std::ofstream(dir_ + "/tokens") << kWorkerToken << " worker\n" << kReaderToken << " reader\n";
    // The ps serves a copy of its pair, which the test rotates in place.
    ASSERT_EQ(std::system(absl::StrCat("cp ", pki_->cert("ps"), " ", dir_, "/live.crt && cp ",
                                       pki_->key("ps"), " ", dir_, "/live.key")
                              .c_str()),
              0);
    // Roles on by the tokens file; client certificates optional (so that a caller with
    // neither a token nor a certificate reaches the gate and is refused there).
    const std::vector<std::string> args = {
        "--tf_config=" + MakeTfConfig({{"ps", {address_}}}, "ps", 0),
        "--tls_cert_file=" + dir_ + "/live.crt", "--tls_key_file=" + dir_ + "/live.key",
        "--tls_ca_file=" + pki_->ca_file(), "--tls_refresh_s=1",
        "--auth_tokens_file=" + dir_ + "/tokens", "--data_root=" + dir_ + "/root"};
    auto ps = Process::Start(BinaryPath("ps_server/ps"), args, {}, dir_ + "/ps.log");
    ASSERT_TRUE(ps.ok()) << ps.status();
    ps_ = std::move(*ps);
    ASSERT_TRUE(ps_->WaitForLog("roles on", absl::Seconds(30))) << ps_->Log();

    // The chief creates a variable through the client library, with its certificate.
    SetProcessTls(pki_->Options("chief"));
    PsClient::Options options;
    options.rpc_timeout = absl::Seconds(5);
    auto client = NewGrpcPsClient({address_}, options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = std::move(*client);
    ASSERT_TRUE(PollUntil([&] { return client_->Discover().ok(); }, absl::Now() + absl::Seconds(30),
                          absl::Milliseconds(100)))
        << ps_->Log();
    VariableDef def;
    def.name = "w";
    def.shape = {64, 8};
    def.initializer.set_type(InitializerSpec::RANDOM_NORMAL);
    def.initializer.set_seed(7);
    def.optimizer.set_type(OptimizerSpec::SGD);
    def.optimizer.set_learning_rate(0.1);
    auto placer = *NewRoundRobinPlacer(1);
    ASSERT_TRUE(client_->CreateVariables({def}, **NewFixedShardsPartitioner(1), placer.get()).ok());
  }
  void TearDown() override { SetProcessTls(TlsOptions()); }

  std::vector<float> PullAll() {
    std::vector<float> values(64 * 8);
    EXPECT_TRUE(client_->Pull("w", absl::MakeSpan(values)).ok());
    return values;
  }

  std::unique_ptr<PsService::Stub> Stub(std::shared_ptr<grpc::ChannelCredentials> creds) {
    grpc::ChannelArguments args;
    static int fresh = 0;
    args.SetInt("shardps.test_fresh", ++fresh);
    return PsService::NewStub(grpc::CreateCustomChannel(address_, creds, args));
  }
  std::shared_ptr<grpc::ChannelCredentials> Cert(const std::string& name) {
    return ChannelCredentialsFor(pki_->Options(name));
  }
  std::shared_ptr<grpc::ChannelCredentials> Token(const std::string& token) {
    return grpc::CompositeChannelCredentials(ChannelCredentialsFor(pki_->Options("")),
                                             grpc::AccessTokenCredentials(token));
  }

  std::string dir_;
  std::string address_;
  std::unique_ptr<TestPki> pki_;
  std::unique_ptr<TestPki> other_ca_;
  std::unique_ptr<Process> ps_;
  std::unique_ptr<PsClient> client_;
};

// Calls `method` of the ps with a request that would change something; the status code.
template <typename Request, typename Response>
grpc::StatusCode Call(
    grpc::Status (PsService::Stub::*method)(grpc::ClientContext*, const Request&, Response*),
    PsService::Stub* stub, const Request& request = Request()) {
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  Response response;
  return (stub->*method)(&ctx, request, &response).error_code();
}

// Every mutating call, as `stub`'s caller; each must get `want`.
void ExpectEveryMutationRefused(PsService::Stub* stub, grpc::StatusCode want,
                                const std::string& who) {
  using S = PsService::Stub;
  PushRequest push;
  push.set_shard("w/part_0");
  push.set_request_id(1);
  push.mutable_data()->assign(64 * 8 * 4, 1);
  EXPECT_EQ(Call(&S::Push, stub, push), want) << who << " Push";
  EXPECT_EQ((Call<PushBatchRequest, PushBatchResponse>(&S::PushBatch, stub)), want) << who;
  EXPECT_EQ((Call<PushRowsRequest, PushRowsResponse>(&S::PushRows, stub)), want) << who;
  EXPECT_EQ((Call<CreateShardsRequest, CreateShardsResponse>(&S::CreateShards, stub)), want) << who;
  EXPECT_EQ((Call<AssignRequest, AssignResponse>(&S::Assign, stub)), want) << who;
  EXPECT_EQ((Call<ShutdownRequest, ShutdownResponse>(&S::Shutdown, stub)), want) << who;
  EXPECT_EQ((Call<SetGenerationRequest, SetGenerationResponse>(&S::SetGeneration, stub)), want)
      << who;
  DropShardsRequest drop;
  drop.set_all(true);
  EXPECT_EQ(Call(&S::DropShards, stub, drop), want) << who;
  EXPECT_EQ((Call<SnapshotRequest, SnapshotResponse>(&S::Snapshot, stub)), want) << who;
  EXPECT_EQ((Call<RestoreRequest, RestoreResponse>(&S::Restore, stub)), want) << who;
  EXPECT_EQ((Call<HoldPushesRequest, HoldPushesResponse>(&S::HoldPushes, stub)), want) << who;
  EXPECT_EQ((Call<MoveBucketsRequest, MoveBucketsResponse>(&S::MoveBuckets, stub)), want) << who;
}

TEST_F(SecurityTest, EveryMutatingCallWithoutTheRightIdentityIsRefusedAndChangesNothing) {
  const std::vector<float> before = PullAll();
  using S = PsService::Stub;

  // No identity (TLS, no certificate, no token), a wrong token: UNAUTHENTICATED, reads too.
  auto anonymous = Stub(ChannelCredentialsFor(pki_->Options("")));
  ExpectEveryMutationRefused(anonymous.get(), grpc::StatusCode::UNAUTHENTICATED, "anonymous");
  EXPECT_EQ((Call<PullRequest, PullResponse>(&S::Pull, anonymous.get())),
            grpc::StatusCode::UNAUTHENTICATED);
  auto wrong = Stub(Token("not-a-token-this-ps-knows"));
  ExpectEveryMutationRefused(wrong.get(), grpc::StatusCode::UNAUTHENTICATED, "wrong token");
  // Plaintext does not even reach the gate.
  auto plaintext = Stub(grpc::InsecureChannelCredentials());
  EXPECT_NE((Call<ShutdownRequest, ShutdownResponse>(&S::Shutdown, plaintext.get())),
            grpc::StatusCode::OK);

  // A reader (token) may read, not push; a worker (certificate or token) may push, not
  // administer.
  auto reader = Stub(Token(kReaderToken));
  ExpectEveryMutationRefused(reader.get(), grpc::StatusCode::PERMISSION_DENIED, "reader");
  for (auto creds : {Cert("worker"), Token(kWorkerToken)}) {
    auto worker = Stub(creds);
    using S = PsService::Stub;
    EXPECT_EQ((Call<ShutdownRequest, ShutdownResponse>(&S::Shutdown, worker.get())),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ((Call<CreateShardsRequest, CreateShardsResponse>(&S::CreateShards, worker.get())),
              grpc::StatusCode::PERMISSION_DENIED);
    DropShardsRequest drop;
    drop.set_all(true);
    EXPECT_EQ(Call(&S::DropShards, worker.get(), drop), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ((Call<RestoreRequest, RestoreResponse>(&S::Restore, worker.get())),
              grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ((Call<AssignRequest, AssignResponse>(&S::Assign, worker.get())),
              grpc::StatusCode::PERMISSION_DENIED);
  }

  // The chief may snapshot and restore, but only inside the data root.
  auto chief = Stub(Cert("chief"));
  for (const std::string& bad :
       {dir_ + "/outside/ps-0.safetensors", dir_ + "/root/../outside/ps-0.safetensors",
        dir_ + "/root/escape/ps-0.safetensors", std::string("/tmp/ps-0.safetensors")}) {
    SnapshotRequest snapshot;
    snapshot.set_checkpoint_id(1);
    snapshot.set_path(bad);
    EXPECT_EQ(Call(&S::Snapshot, chief.get(), snapshot), grpc::StatusCode::PERMISSION_DENIED)
        << bad;
    RestoreRequest restore;
    restore.set_manifest(bad);
    EXPECT_EQ(Call(&S::Restore, chief.get(), restore), grpc::StatusCode::PERMISSION_DENIED) << bad;
  }
  EXPECT_FALSE(access((dir_ + "/outside/ps-0.safetensors").c_str(), F_OK) == 0);

  // Nothing changed, the ps still runs, and it said who it refused.
  EXPECT_TRUE(ps_->Running());
  const std::vector<float> after = PullAll();
  ASSERT_EQ(before.size(), after.size());
  EXPECT_EQ(std::memcmp(before.data(), after.data(), before.size() * sizeof(float)), 0);
  EXPECT_TRUE(ps_->WaitForLog("denied PsService.Shutdown on this ps", absl::Seconds(5)));
  // At most 10 refusal lines a second: the rest are counted in the next line.
  absl::SleepFor(absl::Milliseconds(1100));
  auto worker = Stub(Cert("worker"));
  EXPECT_EQ((Call<ShutdownRequest, ShutdownResponse>(&S::Shutdown, worker.get())),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_TRUE(ps_->WaitForLog("more refusals not logged", absl::Seconds(5)));
  EXPECT_TRUE(ps_->WaitForLog("role worker (certificate spiffe://shardps/worker/0) may not call "
                              "PsService.Shutdown",
                              absl::Seconds(5)))
      << ps_->Log();

  // And the chief's own calls go through: a snapshot inside the root.
  SnapshotRequest good;
  good.set_checkpoint_id(2);
  good.set_path(dir_ + "/root/ps-0.safetensors");
  EXPECT_EQ(Call(&S::Snapshot, chief.get(), good), grpc::StatusCode::OK);
}

TEST_F(SecurityTest, ARotatedServerCertificateIsUsedWithoutARestart) {
  // Clients that trust only the other CA cannot reach the ps yet.
  TlsOptions trusting_other = other_ca_->Options("");
  trusting_other.ca_file = other_ca_->ca_file();
  using S = PsService::Stub;
  auto before = Stub(grpc::CompositeChannelCredentials(ChannelCredentialsFor(trusting_other),
                                                       grpc::AccessTokenCredentials(kReaderToken)));
  EXPECT_EQ((Call<HealthRequest, HealthResponse>(&S::Health, before.get())),
            grpc::StatusCode::UNAVAILABLE);
  // Rotate the pair in place, each file by an atomic rename (as cert-manager's swap does).
  ASSERT_EQ(std::system(absl::StrCat("cp ", other_ca_->key("ps-rotated"), " ", dir_,
                                     "/live.key.new && cp ", other_ca_->cert("ps-rotated"), " ",
                                     dir_, "/live.crt.new && mv ", dir_, "/live.key.new ", dir_,
                                     "/live.key && mv ", dir_, "/live.crt.new ", dir_, "/live.crt")
                            .c_str()),
            0);
  bool rotated = PollUntil(
      [&] {
        auto stub = Stub(grpc::CompositeChannelCredentials(
            ChannelCredentialsFor(trusting_other), grpc::AccessTokenCredentials(kReaderToken)));
        return Call<HealthRequest, HealthResponse>(&S::Health, stub.get()) == grpc::StatusCode::OK;
      },
      absl::Now() + absl::Seconds(30), absl::Milliseconds(250));
  EXPECT_TRUE(rotated) << ps_->Log();
  EXPECT_TRUE(ps_->Running());
}

}  // namespace
}  // namespace testing
}  // namespace shardps
