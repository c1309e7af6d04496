#include "rpc/health_service.h"

#include <memory>

#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class HealthOnlyServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = Health::NewStub(server_->InProcessChannel(grpc::ChannelArguments()));
  }
  void TearDown() override { server_->Shutdown(); }

  grpc::Status Check(const std::string& service, HealthCheckResponse* response) {
    grpc::ClientContext ctx;
    HealthCheckRequest request;
    request.set_service(service);
    return stub_->Check(&ctx, request, response);
  }

  HealthOnlyService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<Health::Stub> stub_;
};

TEST_F(HealthOnlyServiceTest, TheServerAsAWholeIsServing) {
  HealthCheckResponse response;
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

TEST_F(HealthOnlyServiceTest, NotServingOnceSetSoAndServingAgain) {
  HealthCheckResponse response;
  service_.set_serving(false);
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  service_.set_serving(true);
  ASSERT_TRUE(Check("", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
}

TEST_F(HealthOnlyServiceTest, AnotherServiceIsNotFoundByName) {
  HealthCheckResponse response;
  grpc::Status s = Check("shardps.PsService", &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("shardps.PsService"), std::string::npos) << s.error_message();
}

TEST_F(HealthOnlyServiceTest, WatchIsUnimplementedAndSaysSo) {
  grpc::ClientContext ctx;
  HealthCheckRequest request;
  auto reader = stub_->Watch(&ctx, request);
  HealthCheckResponse response;
  EXPECT_FALSE(reader->Read(&response));
  grpc::Status s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace shardps
