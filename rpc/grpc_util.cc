#include "rpc/grpc_util.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "grpc/slice.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "rpc/tls.h"

namespace shardps {
namespace {

// A ZeroCopyOutputStream that builds gRPC slices: small fields are written into slices it
// allocates (growing blocks, as gRPC's ProtoBufferWriter does); a large string that protobuf
// offers for aliasing (WriteAliasedRaw) becomes a slice of its own that points at the
// string's bytes and holds a reference to `keep_alive`.
class SliceWriter final : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  explicit SliceWriter(std::shared_ptr<const void> keep_alive)
      : keep_alive_(std::move(keep_alive)) {}
  ~SliceWriter() override { Seal(); }

  bool Next(void** data, int* size) override {
    Seal();
    const size_t length = next_block_;
    next_block_ = std::min(next_block_ * 2, kMaxBlock);
    block_ = grpc_slice_malloc(length);
    has_block_ = true;
    used_ = length;
    byte_count_ += static_cast<int64_t>(length);
    *data = GRPC_SLICE_START_PTR(block_);
    *size = static_cast<int>(length);
    return true;
  }

  void BackUp(int count) override {
    used_ -= static_cast<size_t>(count);
    byte_count_ -= count;
  }

  int64_t ByteCount() const override { return byte_count_; }

  bool AllowsAliasing() const override { return true; }

  bool WriteAliasedRaw(const void* data, int size) override {
    Seal();
    // The slice's destructor drops this reference: gRPC may hold the slice past the call.
    auto* ref = new std::shared_ptr<const void>(keep_alive_);
    slices_.emplace_back(
        const_cast<void*>(data), static_cast<size_t>(size),
        [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }, ref);
    byte_count_ += size;
    return true;
  }

  void Finish(grpc::ByteBuffer* out) {
    Seal();
    grpc::ByteBuffer buffer(slices_.data(), slices_.size());
    out->Swap(&buffer);
  }

 private:
  // Blocks never fall under gRPC's inlined size, so their bytes do not move when copied.
  static constexpr size_t kMinBlock = 1024;
  static constexpr size_t kMaxBlock = 1024 * 1024;

  void Seal() {
    if (!has_block_) return;
    has_block_ = false;
    if (used_ == 0) {
      grpc_slice_unref(block_);
      return;
    }
    slices_.emplace_back(grpc_slice_sub_no_ref(block_, 0, used_), grpc::Slice::STEAL_REF);
  }

  const std::shared_ptr<const void> keep_alive_;
  std::vector<grpc::Slice> slices_;
  grpc_slice block_;
  bool has_block_ = false;
  size_t used_ = 0;
  size_t next_block_ = kMinBlock;
  int64_t byte_count_ = 0;
};

// Reads a serialized message out of gRPC's slices, without copying except where asked.
class SliceReader {
 public:
  // `slices` must outlive the reader.
  explicit SliceReader(const std::vector<grpc::Slice>& slices) : slices_(slices) {
    SkipEmpty();
  }

  bool AtEnd() const { return index_ == slices_.size(); }

  bool ReadByte(uint8_t* byte) {
    if (AtEnd()) return false;
    *byte = slices_[index_].begin()[offset_];
    Advance(1);
    return true;
  }

  // A base-128 varint of at most 10 bytes.
  bool ReadVarint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte;
      if (!ReadByte(&byte)) return false;
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }

  // Calls sink(pointer, length) for each contiguous run of the next `n` bytes.
  template <typename Sink>
  bool Consume(uint64_t n, Sink sink) {
    while (n > 0) {
      if (AtEnd()) return false;
      const grpc::Slice& slice = slices_[index_];
      const size_t run = std::min<uint64_t>(n, slice.size() - offset_);
      sink(reinterpret_cast<const char*>(slice.begin()) + offset_, run);
      Advance(run);
      n -= run;
    }
    return true;
  }

 private:
  void Advance(size_t n) {
    offset_ += n;
    if (offset_ == slices_[index_].size()) {
      ++index_;
      offset_ = 0;
      SkipEmpty();
    }
  }

  void SkipEmpty() {
    while (index_ < slices_.size() && slices_[index_].size() == 0) ++index_;
  }

  const std::vector<grpc::Slice>& slices_;
  size_t index_ = 0;
  size_t offset_ = 0;
};

// Appends `value` as a base-128 varint.
void AppendVarint(uint64_t value, std::string* out) {
  while (value >= 0x80) {
    out->push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out->push_back(static_cast<char>(value));
}

// HTTP/2 flow control for bulk tensors, the same on both ends: a fixed 16 MiB window per
// stream instead of BDP probing. The probe's pings and the window updates it drives cost
// wake-ups on every large message; a window that covers a whole 4 MiB chunk lets it flow
// without waiting. Measured with transport_bench, alternating runs: dense pull and push
// goodput +7% on average (64 MiB pull 1781 -> 2027 MiB/s).
template <typename SetInt>
void SetFlowControl(SetInt set) {
  set(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  set(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16 << 20);
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  // grpc::StatusCode and absl::StatusCode share the canonical numbering.
  absl::Status result(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
  // The details are our ErrorDetail (ToGrpcStatus), or from a peer that is not shardps
  // (gRPC itself never sets them): what does not parse is dropped, the status kept.
  if (!status.error_details().empty()) {
    ErrorDetail detail;
    if (detail.ParseFromString(status.error_details())) {
      result = WithDetail(std::move(result), detail);
    }
  }
  return result;
}

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  const auto code = static_cast<grpc::StatusCode>(status.code());
  auto payload = status.GetPayload(kErrorDetailUrl);  // absl::optional here
  if (!payload.has_value()) return grpc::Status(code, std::string(status.message()));
  return grpc::Status(code, std::string(status.message()), std::string(*payload));
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, int connection_id) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // Channels with equal arguments share one subchannel (one TCP connection) through gRPC's
  // global pool; a distinct argument per connection_id keeps them apart.
  args.SetInt("shardps.connection_id", connection_id);
  // Larger HTTP/2 windows and frames cut per-frame overhead on bulk tensors.
  args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024 - 1);
  SetFlowControl([&](const char* key, int value) { args.SetInt(key, value); });
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Reconnect quickly after a ps restarts.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // After a refused connection the channel asks its resolver again, which by default may not
  // happen for seconds: a task that starts after its client (or restarts) would stay
  // unreachable that long. Measured: first answer 5 s -> 0.1 s after the server came up.
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 200);
  // The process's TLS (rpc/tls.h: set by the daemon from its flags), plaintext until set.
  return grpc::CreateCustomChannel(address, ProcessChannelCredentials(), args);
}

void ConfigureServerBuilder(grpc::ServerBuilder* builder) {
  builder->SetMaxReceiveMessageSize(std::numeric_limits<int>::max());
  builder->SetMaxSendMessageSize(std::numeric_limits<int>::max());
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 16 * 1024 * 1024 - 1);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // gRPC sets SO_REUSEPORT by default, so a second daemon on a taken port would "serve" too;
  // without it, binding fails and the daemon exits 1.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10000);
  SetFlowControl([&](const char* key, int value) { builder->AddChannelArgument(key, value); });
}

grpc::Status SerializeZeroCopy(const google::protobuf::MessageLite& message,
                               std::shared_ptr<const void> keep_alive, grpc::ByteBuffer* buffer) {
  SliceWriter writer(std::move(keep_alive));
  {
    google::protobuf::io::CodedOutputStream out(&writer);
    out.EnableAliasing(true);
    if (!message.SerializeToCodedStream(&out) || out.HadError()) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("cannot serialize a ", message.GetTypeName()));
    }
  }  // `out` hands back the unused end of its last block here.
  writer.Finish(buffer);
  return grpc::Status::OK;
}

grpc::Status SerializeZeroCopyWithBytes(const google::protobuf::MessageLite& message, int field,
                                        absl::Span<const absl::string_view> segments,
                                        std::shared_ptr<const void> keep_alive,
                                        grpc::ByteBuffer* buffer) {
  size_t total = 0;
  for (absl::string_view segment : segments) total += segment.size();
  if (total > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("a bytes field of ", total,
                                     " bytes is too large for one message"));
  }
  SliceWriter writer(std::move(keep_alive));
  {
    google::protobuf::io::CodedOutputStream out(&writer);
    // The message itself is copied (it is small, and the caller may free it once this
    // returns); only the segments are aliased.
    if (!message.SerializeToCodedStream(&out)) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("cannot serialize a ", message.GetTypeName()));
    }
    out.EnableAliasing(true);
    out.WriteTag((static_cast<uint32_t>(field) << 3) | 2);  // wire type 2: length-delimited
    out.WriteVarint64(total);
    for (absl::string_view segment : segments) {
      out.WriteRawMaybeAliased(segment.data(), static_cast<int>(segment.size()));
    }
    if (out.HadError()) {
      return grpc::Status(grpc::StatusCode::INTERNAL,
                          absl::StrCat("cannot serialize a ", message.GetTypeName()));
    }
  }
  writer.Finish(buffer);
  return grpc::Status::OK;
}

namespace {

// Parses `slices`, a serialized message, into `message`, except for the top-level bytes field
// number `field`: on_length(length) is told its length and on_bytes(p, n) gets its contents,
// run by run in order. Returns that length (0 when the field is absent). `what` names the
// message in errors ("request", "response").
absl::StatusOr<int64_t> ParseWithBytes(const std::vector<grpc::Slice>& slices, int field,
                                       absl::string_view what,
                                       absl::FunctionRef<void(uint64_t)> on_length,
                                       absl::FunctionRef<void(const char*, size_t)> on_bytes,
                                       google::protobuf::MessageLite* message) {
  SliceReader reader(slices);
  auto malformed = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("cannot parse the ", what, " as a ",
                                                   message->GetTypeName(), ": ", why));
  };
  std::string rest;  // every other field, re-encoded for protobuf's parser
  int64_t found = 0;
  bool seen = false;
  while (!reader.AtEnd()) {
    uint64_t tag;
    if (!reader.ReadVarint(&tag)) return malformed("truncated tag");
    const uint64_t number = tag >> 3;
    const int wire_type = static_cast<int>(tag & 7);
    if (number == static_cast<uint64_t>(field) && wire_type == 2) {
      uint64_t length;
      if (!reader.ReadVarint(&length)) return malformed("truncated length");
      if (seen) return malformed(absl::StrCat("field ", field, " appears twice"));
      seen = true;
      found = static_cast<int64_t>(length);
      on_length(length);
      if (!reader.Consume(length, on_bytes)) return malformed("truncated bytes field");
      continue;
    }
    AppendVarint(tag, &rest);
    auto keep = [&rest](const char* p, size_t n) { rest.append(p, n); };
    switch (wire_type) {
      case 0: {  // varint
        uint64_t value;
        if (!reader.ReadVarint(&value)) return malformed("truncated varint");
        AppendVarint(value, &rest);
        break;
      }
      case 1:  // fixed64
        if (!reader.Consume(8, keep)) return malformed("truncated fixed64");
        break;
      case 2: {  // length-delimited
        uint64_t length;
        if (!reader.ReadVarint(&length)) return malformed("truncated length");
        AppendVarint(length, &rest);
        if (!reader.Consume(length, keep)) return malformed("truncated field");
        break;
      }
      case 5:  // fixed32
        if (!reader.Consume(4, keep)) return malformed("truncated fixed32");
        break;
      default:
        return malformed(absl::StrCat("unsupported wire type ", wire_type));
    }
  }
  if (!message->ParseFromString(rest)) return malformed("bad fields");
  return found;
}

}  // namespace

absl::StatusOr<int64_t> ParseWithBytesInto(const grpc::ByteBuffer& buffer, int field,
                                           absl::Span<const absl::Span<char>> outs,
                                           google::protobuf::MessageLite* message) {
  size_t capacity = 0;
  for (absl::Span<char> out : outs) capacity += out.size();
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) {
    return absl::InternalError(absl::StrCat("cannot read the ", message->GetTypeName()));
  }
  // Scatters the bytes over `outs` in order; skips them when the length is wrong.
  bool fits = false;
  size_t index = 0, offset = 0;
  absl::StatusOr<int64_t> found = ParseWithBytes(
      slices, field, "response", [&](uint64_t length) { fits = length == capacity; },
      [&](const char* p, size_t n) {
        while (fits && n > 0) {
          absl::Span<char> out = outs[index];
          const size_t run = std::min(n, out.size() - offset);
          if (run > 0) std::memcpy(out.data() + offset, p, run);  // an empty out may be null
          p += run;
          n -= run;
          offset += run;
          if (offset == out.size()) {
            ++index;
            offset = 0;
          }
        }
      },
      message);
  // A malformed reply is the server's fault, not the caller's.
  if (!found.ok()) return absl::InternalError(found.status().message());
  return found;
}

absl::StatusOr<int64_t> ParseWithBytesInPlace(const grpc::ByteBuffer& buffer, int field,
                                              std::vector<grpc::Slice>* slices,
                                              std::vector<absl::string_view>* pieces,
                                              google::protobuf::MessageLite* message) {
  slices->clear();
  pieces->clear();
  if (!buffer.Dump(slices).ok()) {
    return absl::InternalError(absl::StrCat("cannot read the ", message->GetTypeName()));
  }
  return ParseWithBytes(
      *slices, field, "request", [](uint64_t) {},
      [pieces](const char* p, size_t n) { pieces->emplace_back(p, n); }, message);
}

namespace {

// Whether `host` is an IP literal of the loopback network: 127.0.0.0/8 or [::1].
bool IsLoopbackLiteral(absl::string_view host) {
  // "localhost" too: gRPC binds it on both loopback addresses, and on nothing else.
  if (host == "[::1]" || host == "localhost") return true;
  in_addr v4;
  return ::inet_pton(AF_INET, std::string(host).c_str(), &v4) == 1 &&
         (ntohl(v4.s_addr) >> 24) == 127;
}

}  // namespace

absl::StatusOr<std::string> ListenAddress(absl::string_view address,
                                          absl::string_view bind_host) {
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("address \"", address, "\": expected host:port"));
  }
  std::string host(bind_host);
  if (host.empty()) {
    const absl::string_view tf_host = address.substr(0, colon);
    if (IsLoopbackLiteral(tf_host)) {
      host = std::string(tf_host);
    } else {
      host = address.front() == '[' ? "[::]" : "0.0.0.0";
    }
  }
  return absl::StrCat(host, ":", port);
}

}  // namespace shardps
