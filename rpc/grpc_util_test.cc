#include "rpc/grpc_util.h"

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(GrpcUtilTest, StatusRoundTripKeepsCodeAndMessage) {
  absl::Status s = absl::NotFoundError("shard \"w/part_1\" not found");
  absl::Status back = FromGrpcStatus(ToGrpcStatus(s));
  EXPECT_EQ(back.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(back.message(), s.message());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
  EXPECT_EQ(FromGrpcStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "down")).code(),
            absl::StatusCode::kUnavailable);
}

TEST(GrpcUtilTest, ListenAddress) {
  EXPECT_EQ(*ListenAddress("ps-0.svc:2222", ""), "0.0.0.0:2222");
  EXPECT_EQ(*ListenAddress("[::1]:2222", ""), "[::]:2222");
  EXPECT_EQ(*ListenAddress("localhost:2222", "127.0.0.1"), "127.0.0.1:2222");
  EXPECT_FALSE(ListenAddress("localhost", "").ok());
  EXPECT_FALSE(ListenAddress("localhost:x", "").ok());
}

}  // namespace
}  // namespace shardps
