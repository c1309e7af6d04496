#include "rpc/grpc_util.h"

#include <string>
#include <vector>

#include "google/protobuf/wrappers.pb.h"
#include "grpcpp/support/proto_buffer_reader.h"
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

TEST(GrpcUtilTest, SerializeZeroCopyPointsIntoLargeFields) {
  auto message = std::make_shared<google::protobuf::BytesValue>();
  message->set_value(std::string(1 << 20, 'x'));
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(SerializeZeroCopy(*message, message, &buffer).ok());
  EXPECT_EQ(buffer.Length(), message->ByteSizeLong());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  bool aliased = false;
  for (const grpc::Slice& slice : slices) {
    if (static_cast<const void*>(slice.begin()) == message->value().data()) aliased = true;
  }
  EXPECT_TRUE(aliased) << "the 1 MiB value was copied";
  // Every reference the slices held goes with them.
  slices.clear();
  EXPECT_GT(message.use_count(), 1);
  grpc::ByteBuffer copy = buffer;
  buffer.Clear();
  google::protobuf::BytesValue back;
  {
    grpc::ProtoBufferReader reader(&copy);
    ASSERT_TRUE(back.ParseFromZeroCopyStream(&reader));
  }
  EXPECT_EQ(back.value(), message->value());
  copy.Clear();
  EXPECT_EQ(message.use_count(), 1);
}

TEST(GrpcUtilTest, SerializeZeroCopyCopiesSmallMessages) {
  google::protobuf::BytesValue message;
  message.set_value("abc");
  auto keep_alive = std::make_shared<int>(0);
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(SerializeZeroCopy(message, keep_alive, &buffer).ok());
  EXPECT_EQ(keep_alive.use_count(), 1);  // nothing points into the message
  google::protobuf::BytesValue back;
  grpc::ProtoBufferReader reader(&buffer);
  ASSERT_TRUE(back.ParseFromZeroCopyStream(&reader));
  EXPECT_EQ(back.value(), "abc");
}

}  // namespace
}  // namespace shardps
