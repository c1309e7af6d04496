// The edge between gRPC and the rest of shardps: status conversion (the only place that
// translates grpc::Status <-> absl::Status, typed error details included), channel / server settings shared by every
// daemon and client (unlimited message sizes, separate TCP connections per channel), and a
// serializer that hands large tensors to gRPC without copying them.
//
// Thread-safety: all functions are thread-safe.
#ifndef SHARDPS_RPC_GRPC_UTIL_H_
#define SHARDPS_RPC_GRPC_UTIL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/channel.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace shardps {

// Code and message map one to one; a typed ErrorDetail (common/error_detail.h) travels as
// the gRPC status' binary details (its serialized bytes), so that a detail a ps sets
// survives a worker relaying the error to the chief. Other payloads do not cross; details
// that do not parse as an ErrorDetail are ignored.
absl::Status FromGrpcStatus(const grpc::Status& status);
grpc::Status ToGrpcStatus(const absl::Status& status);

// A channel to `address` ("host:port") without gRPC's 4 MB message limit. Channels made with
// different `connection_id`s use different TCP connections, so large transfers can be
// spread over several streams. Each call's context needs AttachProtocolVersion
// (rpc/protocol.h).
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address, int connection_id = 0);

// Applies shardps' server settings (no message size limit, keepalive) to a builder.
void ConfigureServerBuilder(grpc::ServerBuilder* builder);

// Serializes `message` into `buffer` as gRPC's own serializer would, except that every bytes
// field larger than a few KiB is not copied: the buffer's slices point into the message's own
// strings. `keep_alive` must keep `message` alive and unchanged; the buffer holds a reference
// to it until gRPC releases the last slice that points into the message, which may be after
// the call has completed (a cancelled write still in the transport), so the message must not
// be reused or freed before `keep_alive`'s last reference goes.
grpc::Status SerializeZeroCopy(const google::protobuf::MessageLite& message,
                               std::shared_ptr<const void> keep_alive, grpc::ByteBuffer* buffer);

// As SerializeZeroCopy, with one more length-delimited field appended: field number `field`
// holding the concatenation of `segments`, which are not copied either (each is sent from
// where it lies). Lets a caller send tensors straight from its own memory, without first
// gathering them into the message; `message` must not set that field itself. The message's
// own fields are copied (it may be freed on return); `keep_alive` must keep every segment
// alive and unchanged, as for SerializeZeroCopy.
grpc::Status SerializeZeroCopyWithBytes(const google::protobuf::MessageLite& message, int field,
                                        absl::Span<const absl::string_view> segments,
                                        std::shared_ptr<const void> keep_alive,
                                        grpc::ByteBuffer* buffer);

// Parses `buffer`, a serialized message, into `message`, except for the top-level bytes
// field number `field`, whose contents are copied from gRPC's slices straight into `outs`
// (filling outs[0], then outs[1], ...) instead of into the message: this saves the copy into
// a string and the copy out of it. Returns the length the field had on the wire (0 when
// absent); `outs` are written only when that length is exactly their total size, so a caller
// compares the two to detect a short or long reply. Fails on a malformed message.
absl::StatusOr<int64_t> ParseWithBytesInto(const grpc::ByteBuffer& buffer, int field,
                                           absl::Span<const absl::Span<char>> outs,
                                           google::protobuf::MessageLite* message);

// As ParseWithBytesInto, but the bytes field is not copied at all: `pieces` receives views of
// its contents in gRPC's slices, in order, and `slices` holds references to those slices (the
// pieces stay valid while *slices does, even after `buffer` is gone). A malformed message
// fails with INVALID_ARGUMENT (this parses what a client sent).
absl::StatusOr<int64_t> ParseWithBytesInPlace(const grpc::ByteBuffer& buffer, int field,
                                              std::vector<grpc::Slice>* slices,
                                              std::vector<absl::string_view>* pieces,
                                              google::protobuf::MessageLite* message);

// The address a daemon listens on for the TF_CONFIG address `address`:
//  - `bind_host` with TF_CONFIG's port, when given;
//  - the address itself when its host is a loopback IP literal (127.0.0.0/8, or [::1]) or
//    "localhost" (which gRPC binds on both loopback addresses and nothing else): tasks
//    that share one machine, each at its own loopback address and possibly the same port (as
//    deploy/run_local.sh and the process tests run them), must not all listen everywhere;
//  - else every interface, "0.0.0.0:PORT" (or "[::]:PORT" for a bracketed IPv6 host): a host
//    or pod reached by a name, a service address or a NAT'd address that is not its own
//    interface's, and by `kubectl port-forward` on its localhost. Names are not resolved, so a
//    start never waits on DNS.
// Fails when the port cannot be parsed.
absl::StatusOr<std::string> ListenAddress(absl::string_view address,
                                          absl::string_view bind_host);

}  // namespace shardps

#endif  // SHARDPS_RPC_GRPC_UTIL_H_
