// The protocol version on the wire: AttachProtocolVersion's calls carry this process's range, and a
// service that checks it refuses a caller of an incompatible one, or one without a version,
// before it touches any state.
#include "rpc/protocol.h"

#include <atomic>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/protocol_version.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/grpc_util.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

// A ps service whose Health checks the caller's protocol, then counts the call and returns
// the protocol header it received in trailing metadata.
class CheckingService final : public PsService::CallbackService {
 public:
  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const HealthRequest*,
                                   HealthResponse*) override {
    if (auto* rejected = RejectIncompatibleClient(ctx, "ps")) return rejected;
    ++handled;
    auto it = ctx->client_metadata().find(kProtocolMetadataKey);
    ctx->AddTrailingMetadata("seen", std::string(it->second.data(), it->second.size()));
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  std::atomic<int> handled{0};
};

class ProtocolTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = "127.0.0.1:" + std::to_string(port_);
  }
  void TearDown() override {
    server_->Shutdown();
    SetLocalProtocolForTesting({kMinProtocolVersion, kProtocolVersion});
  }

  // A call carrying `header` as its protocol version (none when empty).
  absl::Status RawCall(const std::string& header) {
    auto stub = PsService::NewStub(grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    if (!header.empty()) ctx.AddMetadata(kProtocolMetadataKey, header);
    HealthResponse response;
    return FromGrpcStatus(stub->Health(&ctx, HealthRequest(), &response));
  }

  CheckingService service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

TEST_F(ProtocolTest, AttachedCallsCarryThisProcessesRange) {
  auto stub = PsService::NewStub(NewChannel(address_));
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  HealthResponse response;
  grpc::Status s = stub->Health(&ctx, HealthRequest(), &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  auto seen = ctx.GetServerTrailingMetadata().find("seen");
  ASSERT_NE(seen, ctx.GetServerTrailingMetadata().end());
  EXPECT_EQ(std::string(seen->second.data(), seen->second.size()),
            FormatProtocolHeader({kMinProtocolVersion, kProtocolVersion}));
  EXPECT_EQ(service_.handled, 1);
}

TEST_F(ProtocolTest, CompatibleCallersAreServed) {
  EXPECT_TRUE(RawCall(FormatProtocolHeader(LocalProtocol())).ok());
  // A newer client that still speaks this version.
  EXPECT_TRUE(RawCall(absl::StrCat(kProtocolVersion, "-", kProtocolVersion + 1)).ok());
  EXPECT_EQ(service_.handled, 2);
}

TEST_F(ProtocolTest, AnIncompatibleCallerIsRefusedNamingBothVersionsAndNothingRuns) {
  const std::string newer = std::to_string(kProtocolVersion + 1);
  absl::Status s = RawCall(newer + "-" + newer);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("incompatible shardps protocol"));
  EXPECT_THAT(s.message(), HasSubstr("speaks protocol " + newer));
  EXPECT_THAT(s.message(), HasSubstr("this ps speaks protocol " + std::to_string(kProtocolVersion)));
  EXPECT_THAT(s.message(), HasSubstr("127.0.0.1"));  // who called
  EXPECT_EQ(DetailKind(s), ErrorDetail::PROTOCOL_MISMATCH);
  EXPECT_EQ(service_.handled, 0);
}

TEST_F(ProtocolTest, ACallWithoutAVersionOrWithGarbageIsRefused) {
  absl::Status s = RawCall("");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("carries no shardps protocol version"));
  EXPECT_THAT(s.message(), HasSubstr("this ps speaks protocol"));
  s = RawCall("banana");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("bad shardps protocol version \"banana\""));
  EXPECT_EQ(DetailKind(s), ErrorDetail::PROTOCOL_MISMATCH);
  EXPECT_EQ(service_.handled, 0);
}

TEST_F(ProtocolTest, AProcessClaimingAnotherVersionIsRefusedByItsPeers) {
  // What --test_protocol_version does: this client now sends 9, the server (same process,
  // same setting) would accept it; so check the message from the header on the wire instead.
  SetLocalProtocolForTesting({9, 9});
  auto stub = PsService::NewStub(NewChannel(address_));
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  HealthResponse response;
  ASSERT_TRUE(stub->Health(&ctx, HealthRequest(), &response).ok());
  auto seen = ctx.GetServerTrailingMetadata().find("seen");
  ASSERT_NE(seen, ctx.GetServerTrailingMetadata().end());
  EXPECT_EQ(std::string(seen->second.data(), seen->second.size()), "9-9");
  SetLocalProtocolForTesting({kMinProtocolVersion, kProtocolVersion});
  EXPECT_EQ(RawCall("9-9").code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace shardps
