#include "rpc/grpc_util.h"

#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/error_detail.h"
#include "google/protobuf/wrappers.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "proto/ps.pb.h"

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

ErrorDetail PsDetail(ErrorDetail::Kind kind, int ps_task) {
  ErrorDetail detail;
  detail.set_kind(kind);
  detail.set_ps_task(ps_task);
  detail.set_ps_incarnation(0x1234567890abcdefULL);
  detail.set_generation(7);
  return detail;
}

TEST(GrpcUtilTest, StatusRoundTripKeepsTheErrorDetail) {
  absl::Status s = WithDetail(absl::UnavailableError("ps:2 (h:1): connection refused"),
                              PsDetail(ErrorDetail::PS_UNAVAILABLE, 2));
  grpc::Status wire = ToGrpcStatus(s);
  EXPECT_FALSE(wire.error_details().empty());
  absl::Status back = FromGrpcStatus(wire);
  EXPECT_EQ(back.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(back.message(), s.message());
  std::optional<ErrorDetail> detail = GetDetail(back);
  ASSERT_TRUE(detail.has_value());
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(detail->ps_task(), 2);
  EXPECT_EQ(detail->ps_incarnation(), 0x1234567890abcdefULL);
  EXPECT_EQ(detail->generation(), 7);

  // No detail: no details on the wire, none back.
  EXPECT_TRUE(ToGrpcStatus(absl::AbortedError("stale")).error_details().empty());
  EXPECT_FALSE(GetDetail(FromGrpcStatus(ToGrpcStatus(absl::AbortedError("stale")))).has_value());
}

TEST(GrpcUtilTest, DetailsThatDoNotParseAreIgnored) {
  // A truncated varint: not an ErrorDetail (nor any message).
  absl::Status s =
      FromGrpcStatus(grpc::Status(grpc::StatusCode::NOT_FOUND, "no shard", "\xff\xff"));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "no shard");
  EXPECT_FALSE(GetDetail(s).has_value());
  EXPECT_EQ(DetailKind(s), ErrorDetail::UNSPECIFIED);
}

// A PsService whose Health answers what the test sets, with `relay_to` set: by calling that
// server's Health and relaying its error (annotated), as a worker relays a ps error to the
// chief.
class HealthService final : public PsService::CallbackService {
 public:
  explicit HealthService(absl::Status answer) : answer_(std::move(answer)) {}
  void RelayTo(std::shared_ptr<grpc::Channel> channel) { relay_ = PsService::NewStub(channel); }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const HealthRequest*,
                                   HealthResponse*) override {
    auto* reactor = ctx->DefaultReactor();
    if (relay_ == nullptr) {
      reactor->Finish(ToGrpcStatus(answer_));
      return reactor;
    }
    // Owned by the callback, which deletes it with the relayed call's completion.
    struct Relay {
      grpc::ClientContext ctx;
      HealthRequest request;
      HealthResponse response;
    };
    auto* relay = new Relay;
    relay_->async()->Health(&relay->ctx, &relay->request, &relay->response,
                            [reactor, relay](grpc::Status s) {
                              delete relay;
                              reactor->Finish(
                                  ToGrpcStatus(Annotate(FromGrpcStatus(s), "step 3: pull")));
                            });
    return reactor;
  }

 private:
  const absl::Status answer_;
  std::unique_ptr<PsService::Stub> relay_;
};

// A server on 127.0.0.1 (any port) running `service`.
std::unique_ptr<grpc::Server> Serve(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(&builder);
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

TEST(GrpcUtilTest, DetailSurvivesARelayThroughASecondServer) {
  // "ps" answers with a typed detail; "worker" relays it; the test is the "chief".
  HealthService ps(WithDetail(absl::NotFoundError("\"w/part_1\": no such shard on ps task 1"),
                              PsDetail(ErrorDetail::PS_STATE_LOST, 1)));
  int ps_port = 0;
  std::unique_ptr<grpc::Server> ps_server = Serve(&ps, &ps_port);
  ASSERT_NE(ps_server, nullptr);
  HealthService worker(absl::OkStatus());
  worker.RelayTo(NewChannel("127.0.0.1:" + std::to_string(ps_port)));
  int worker_port = 0;
  std::unique_ptr<grpc::Server> worker_server = Serve(&worker, &worker_port);
  ASSERT_NE(worker_server, nullptr);

  auto stub = PsService::NewStub(NewChannel("127.0.0.1:" + std::to_string(worker_port)));
  grpc::ClientContext ctx;
  HealthResponse response;
  absl::Status s = FromGrpcStatus(stub->Health(&ctx, HealthRequest(), &response));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "step 3: pull: \"w/part_1\": no such shard on ps task 1");
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value()) << s;
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_STATE_LOST);
  EXPECT_EQ(detail->ps_task(), 1);
  EXPECT_EQ(detail->generation(), 7);

  worker_server->Shutdown();
  ps_server->Shutdown();
}

TEST(GrpcUtilTest, ErrorWithoutDetailCrossesWithoutOne) {
  HealthService ps(absl::AbortedError("stale step 4"));
  int port = 0;
  std::unique_ptr<grpc::Server> server = Serve(&ps, &port);
  ASSERT_NE(server, nullptr);
  auto stub = PsService::NewStub(NewChannel("127.0.0.1:" + std::to_string(port)));
  grpc::ClientContext ctx;
  HealthResponse response;
  absl::Status s = FromGrpcStatus(stub->Health(&ctx, HealthRequest(), &response));
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(s.message(), "stale step 4");
  EXPECT_FALSE(GetDetail(s).has_value());
  server->Shutdown();
}

TEST(GrpcUtilTest, ListenAddress) {
  EXPECT_EQ(*ListenAddress("ps-0.svc:2222", ""), "0.0.0.0:2222");
  EXPECT_EQ(*ListenAddress("10.1.2.3:2222", ""), "0.0.0.0:2222");
  EXPECT_EQ(*ListenAddress("[fd00::5]:2222", ""), "[::]:2222");
  // A loopback literal is bound itself: tasks on one machine at their own 127.x addresses.
  EXPECT_EQ(*ListenAddress("127.0.0.1:2222", ""), "127.0.0.1:2222");
  EXPECT_EQ(*ListenAddress("127.31.7.2:2222", ""), "127.31.7.2:2222");
  EXPECT_EQ(*ListenAddress("[::1]:2222", ""), "[::1]:2222");
  // "localhost" binds loopback only; any other name is not resolved: every interface.
  EXPECT_EQ(*ListenAddress("localhost:2222", ""), "localhost:2222");
  EXPECT_EQ(*ListenAddress("ps-0.shardps:2222", ""), "0.0.0.0:2222");
  EXPECT_EQ(*ListenAddress("128.0.0.1:2222", ""), "0.0.0.0:2222");
  EXPECT_EQ(*ListenAddress("127.0.0.1:2222", "0.0.0.0"), "0.0.0.0:2222");
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

// The bytes of `buffer` cut into slices of `piece` bytes (the last may be shorter), so that
// varints, tags and the bytes field straddle slice boundaries.
grpc::ByteBuffer Recut(const grpc::ByteBuffer& buffer, size_t piece) {
  grpc::Slice whole;
  EXPECT_TRUE(buffer.DumpToSingleSlice(&whole).ok());
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < whole.size(); at += piece) {
    slices.emplace_back(whole.begin() + at, std::min(piece, whole.size() - at));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

TEST(GrpcUtilTest, SerializeZeroCopyWithBytesSendsFromTheCallersMemory) {
  auto payload = std::make_shared<std::string>(300000, '\0');
  for (size_t i = 0; i < payload->size(); ++i) (*payload)[i] = static_cast<char>(i * 7);
  PushRequest request;
  request.set_request_id(99);
  request.set_shard("w/part_1");
  request.set_row_end(12);
  request.mutable_sync()->set_step(5);
  grpc::ByteBuffer buffer;
  const absl::string_view segments[] = {*payload};
  ASSERT_TRUE(SerializeZeroCopyWithBytes(request, 5, segments, payload, &buffer).ok());
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(buffer.Dump(&slices).ok());
  bool aliased = false;
  for (const grpc::Slice& slice : slices) {
    if (static_cast<const void*>(slice.begin()) == payload->data()) aliased = true;
  }
  EXPECT_TRUE(aliased) << "the payload was copied";
  slices.clear();
  PushRequest back;
  {
    grpc::ProtoBufferReader reader(&buffer);
    ASSERT_TRUE(back.ParseFromZeroCopyStream(&reader));
  }
  EXPECT_EQ(back.data(), *payload);
  back.clear_data();
  EXPECT_EQ(back.SerializeAsString(), request.SerializeAsString());
  buffer.Clear();
  EXPECT_EQ(payload.use_count(), 1);
}

TEST(GrpcUtilTest, ParseWithBytesIntoCopiesTheFieldStraightOut) {
  PullResponse response;
  std::string data(70001, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 13 + 1);
  response.set_data(data);
  response.set_version(123456789012);
  response.mutable_shape()->add_dim(7);
  grpc::ByteBuffer serialized(nullptr, 0);
  {
    grpc::Slice slice(response.SerializeAsString());
    serialized = grpc::ByteBuffer(&slice, 1);
  }
  for (size_t piece : {size_t{1}, size_t{3}, size_t{4096}, size_t{1} << 20}) {
    grpc::ByteBuffer buffer = Recut(serialized, piece);
    std::string out(data.size(), 'z');
    PullResponse rest;
    absl::StatusOr<int64_t> found =
        ParseWithBytesInto(buffer, 1, {absl::MakeSpan(&out[0], out.size())}, &rest);
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, static_cast<int64_t>(data.size()));
    EXPECT_EQ(out, data) << "piece " << piece;
    EXPECT_TRUE(rest.data().empty());
    EXPECT_EQ(rest.version(), 123456789012);
    ASSERT_EQ(rest.shape().dim_size(), 1);
    EXPECT_EQ(rest.shape().dim(0), 7);
  }
}

TEST(GrpcUtilTest, ParseWithBytesIntoLeavesTheOutputAloneOnALengthMismatch) {
  PullResponse response;
  response.set_data(std::string(10, 'a'));
  response.set_version(3);
  grpc::Slice slice(response.SerializeAsString());
  grpc::ByteBuffer buffer(&slice, 1);
  std::string out(12, 'z');
  PullResponse rest;
  absl::StatusOr<int64_t> found =
      ParseWithBytesInto(buffer, 1, {absl::MakeSpan(&out[0], out.size())}, &rest);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, 10);
  EXPECT_EQ(out, std::string(12, 'z'));
  EXPECT_EQ(rest.version(), 3);

  // An absent field reads as length 0.
  PullResponse empty;
  empty.set_version(4);
  grpc::Slice empty_slice(empty.SerializeAsString());
  grpc::ByteBuffer empty_buffer(&empty_slice, 1);
  found = ParseWithBytesInto(empty_buffer, 1, {absl::MakeSpan(&out[0], out.size())}, &rest);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(*found, 0);
  EXPECT_EQ(rest.version(), 4);
}

TEST(GrpcUtilTest, ParseWithBytesIntoRejectsMalformedMessages) {
  PullResponse response;
  response.set_data(std::string(100, 'a'));
  response.set_version(3);
  const std::string wire = response.SerializeAsString();
  std::string out(100, 'z');
  PullResponse rest;
  // Cut short inside the bytes field, and a tag with wire type 7.
  for (const std::string& bad : {wire.substr(0, 50), std::string("\x0f\x01")}) {
    grpc::Slice slice(bad);
    grpc::ByteBuffer buffer(&slice, 1);
    absl::StatusOr<int64_t> found =
        ParseWithBytesInto(buffer, 1, {absl::MakeSpan(&out[0], out.size())}, &rest);
    EXPECT_FALSE(found.ok());
    EXPECT_NE(found.status().message().find("PullResponse"), std::string::npos)
        << found.status();
  }
}

TEST(GrpcUtilTest, ParseWithBytesInPlaceViewsTheFieldInGrpcSlices) {
  PushBatchRequest request;
  request.add_pushes()->set_shard("s");
  request.add_data_bytes(70001);
  std::string data(70001, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 3);
  request.set_data(data);
  grpc::Slice whole(request.SerializeAsString());
  const grpc::ByteBuffer serialized(&whole, 1);
  for (size_t piece : {size_t{1}, size_t{5}, size_t{16384}, size_t{1} << 20}) {
    std::vector<grpc::Slice> slices;
    std::vector<absl::string_view> pieces;
    PushBatchRequest header;
    absl::StatusOr<int64_t> found;
    {
      grpc::ByteBuffer buffer = Recut(serialized, piece);
      found = ParseWithBytesInPlace(buffer, PushBatchRequest::kDataFieldNumber, &slices,
                                    &pieces, &header);
    }  // the pieces outlive the buffer: `slices` holds them
    ASSERT_TRUE(found.ok()) << found.status();
    EXPECT_EQ(*found, 70001);
    std::string joined;
    for (absl::string_view p : pieces) {
      // Each piece points into one of the slices: nothing was copied.
      bool inside = false;
      for (const grpc::Slice& s : slices) {
        const char* b = reinterpret_cast<const char*>(s.begin());
        inside |= p.data() >= b && p.data() + p.size() <= b + s.size();
      }
      EXPECT_TRUE(inside);
      joined.append(p.data(), p.size());
    }
    EXPECT_EQ(joined, data) << "piece " << piece;
    EXPECT_TRUE(header.data().empty());
    ASSERT_EQ(header.pushes_size(), 1);
    EXPECT_EQ(header.pushes(0).shard(), "s");
    ASSERT_EQ(header.data_bytes_size(), 1);
  }
  // A request cut short is the client's fault: INVALID_ARGUMENT naming the message.
  grpc::Slice cut(request.SerializeAsString().substr(0, 500));
  std::vector<grpc::Slice> slices;
  std::vector<absl::string_view> pieces;
  PushBatchRequest header;
  absl::StatusOr<int64_t> found = ParseWithBytesInPlace(
      grpc::ByteBuffer(&cut, 1), PushBatchRequest::kDataFieldNumber, &slices, &pieces, &header);
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(found.status().message().find("PushBatchRequest"), std::string::npos);
}

TEST(GrpcUtilTest, BytesFieldsGatherAndScatterOverSegments) {
  // Three segments go out as one field and come back split differently over three outputs.
  auto owner = std::make_shared<std::string>();
  for (int i = 0; i < 100000; ++i) owner->push_back(static_cast<char>(i * 31 + 7));
  const absl::string_view all(*owner);
  const absl::string_view segments[] = {all.substr(0, 10), all.substr(10, 60000),
                                        all.substr(60010)};
  PullBatchResponse meta;
  meta.add_pulls()->set_version(8);
  meta.add_pulls()->set_version(9);
  grpc::ByteBuffer buffer;
  ASSERT_TRUE(SerializeZeroCopyWithBytes(meta, PullBatchResponse::kDataFieldNumber, segments,
                                         owner, &buffer)
                  .ok());
  std::string a(33333, 'z'), b(0, 'z'), c(100000 - 33333, 'z');
  const absl::Span<char> outs[] = {absl::MakeSpan(&a[0], a.size()), absl::Span<char>(),
                                   absl::MakeSpan(&c[0], c.size())};
  PullBatchResponse back;
  absl::StatusOr<int64_t> found =
      ParseWithBytesInto(Recut(buffer, 4097), PullBatchResponse::kDataFieldNumber, outs, &back);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, 100000);
  EXPECT_EQ(a + b + c, *owner);
  ASSERT_EQ(back.pulls_size(), 2);
  EXPECT_EQ(back.pulls(1).version(), 9);
  EXPECT_TRUE(back.data().empty());
}

}  // namespace
}  // namespace shardps
