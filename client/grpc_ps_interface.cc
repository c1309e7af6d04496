#include "client/grpc_ps_interface.h"

#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/serial_executor.h"
#include "grpcpp/client_context.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

// Requests whose tensor bytes reach this size are sent without copying them (see RawCall).
constexpr size_t kZeroCopyBytes = 32 << 10;

// The full name gRPC routes a raw call by ("/shardps.PsService/Push"). gRPC keeps a pointer
// to it for the call's lifetime, so each is made once and never freed.
const std::string* NewMethodName(const char* method) {
  return new std::string(absl::StrCat("/", PsService::service_full_name(), "/", method));
}

// Set while a raw call's completion callback runs on this thread (see RawCall::Release).
thread_local bool in_raw_completion = false;

// The bytes a pull into `outs` must fill.
int64_t TotalBytes(absl::Span<const absl::Span<char>> outs) {
  int64_t total = 0;
  for (absl::Span<char> out : outs) total += static_cast<int64_t>(out.size());
  return total;
}

class GrpcPsInterface : public PsInterface {
 public:
  GrpcPsInterface(const std::string& name, const std::string& address, int num_connections)
      : name_(name) {
    if (num_connections < 1) num_connections = 1;
    for (int i = 0; i < num_connections; ++i) {
      std::shared_ptr<grpc::Channel> channel = NewChannel(address, i);
      stubs_.push_back({PsService::NewStub(channel), std::make_unique<grpc::GenericStub>(channel)});
    }
  }

  const std::string& name() const override { return name_; }

  // The typed stub's call of Method, in a Method##Async body: the context lives until the
  // call completes, and `done` gets its status.
#define SHARDPS_GRPC_TYPED_CALL(Method)                                                  \
  auto* ctx = NewContext(deadline);                                                      \
  NextStub().typed->async()->Method(ctx, request, response,                              \
                                    [ctx, done = std::move(done)](grpc::Status s) {      \
                                      delete ctx;                                        \
                                      done(FromGrpcStatus(s));                           \
                                    });

#define SHARDPS_GRPC_METHOD(Method)                                                      \
  void Method##Async(const Method##Request* request, Method##Response* response,        \
                     absl::Time deadline, StatusCallback done) override {               \
    SHARDPS_GRPC_TYPED_CALL(Method)                                                      \
  }

  SHARDPS_GRPC_METHOD(CreateShards)
  SHARDPS_GRPC_METHOD(ListShards)
  SHARDPS_GRPC_METHOD(Pull)
  SHARDPS_GRPC_METHOD(Health)
  SHARDPS_GRPC_METHOD(Shutdown)
  SHARDPS_GRPC_METHOD(SetGeneration)
  SHARDPS_GRPC_METHOD(DropShards)
  SHARDPS_GRPC_METHOD(Snapshot)
  SHARDPS_GRPC_METHOD(HoldPushes)
  SHARDPS_GRPC_METHOD(MoveBuckets)
  SHARDPS_GRPC_METHOD(SnapshotStatus)
  SHARDPS_GRPC_METHOD(Restore)
#undef SHARDPS_GRPC_METHOD

  // Requests that carry tensors: large ones go out without a copy.
#define SHARDPS_GRPC_ZERO_COPY_METHOD(Method)                                            \
  void Method##Async(const Method##Request* request, Method##Response* response,        \
                     absl::Time deadline, StatusCallback done) override {               \
    if (request->data().size() >= kZeroCopyBytes) {                                     \
      static const std::string* const method = NewMethodName(#Method);                   \
      RawCall::Start(&releases_, NextStub().generic.get(), *method,                      \
                     ZeroCopySerializer(request), RawCall::ParseAs(response), deadline,  \
                     std::move(done));                                                   \
      return;                                                                            \
    }                                                                                    \
    SHARDPS_GRPC_TYPED_CALL(Method)                                                      \
  }

  SHARDPS_GRPC_ZERO_COPY_METHOD(Push)
  SHARDPS_GRPC_ZERO_COPY_METHOD(Assign)
#undef SHARDPS_GRPC_ZERO_COPY_METHOD
#undef SHARDPS_GRPC_TYPED_CALL

  // Row calls carry their ids raw (ids_bytes) only once the ps has said that it reads them
  // (rpc/protocol.h, kRowIdsBytesMetadataKey); until then, and for a ps of an earlier release,
  // they go as the packed `ids` field.
  void PullRowsAsync(const PullRowsRequest* request, PullRowsResponse* response,
                     absl::Time deadline, StatusCallback done) override {
    static const std::string* const method = NewMethodName("PullRows");
    RawCall::Start(
        &releases_, NextStub().generic.get(), *method, RowRequestSerializer(request),
        RawCall::ParseAs(response), deadline, std::move(done), LearnRowIdsBytes());
  }

  // The pulled rows go from gRPC's receive slices straight into `outs`.
  void PullRowsIntoAsync(const PullRowsRequest* request, PullRowsResponse* response,
                         absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                         StatusCallback done) override {
    static const std::string* const method = NewMethodName("PullRows");
    RawCall::Start(
        &releases_, NextStub().generic.get(), *method, RowRequestSerializer(request),
        [request, response, outs](grpc::ByteBuffer* buffer) -> absl::Status {
          const int64_t expected = TotalBytes(outs);
          absl::StatusOr<int64_t> got =
              ParseWithBytesInto(*buffer, PullRowsResponse::kDataFieldNumber, outs, response);
          if (!got.ok()) return got.status();
          if (*got != expected) return PulledRowsSizeError(*request, *got, expected);
          return absl::OkStatus();
        },
        deadline, std::move(done), LearnRowIdsBytes());
  }

  // The row gradients are sent from the request's own string, without a copy.
  void PushRowsAsync(const PushRowsRequest* request, PushRowsResponse* response,
                     absl::Time deadline, StatusCallback done) override {
    static const std::string* const method = NewMethodName("PushRows");
    RawCall::Start(
        &releases_, NextStub().generic.get(), *method, RowRequestSerializer(request),
        RawCall::ParseAs(response), deadline, std::move(done), LearnRowIdsBytes());
  }

  // One call per batch once the ps has said that it serves them (kRowBatchesMetadataKey);
  // until then one call per item. The rows go from gRPC's receive slices straight into
  // `outs`.
  void PullRowsBatchIntoAsync(const PullRowsBatchRequest* request,
                              PullRowsBatchResponse* response,
                              absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                              StatusCallback done) override {
    if (!peer_takes_row_batches_.load(std::memory_order_relaxed)) {
      return PsInterface::PullRowsBatchIntoAsync(request, response, outs, deadline,
                                                 std::move(done));
    }
    static const std::string* const method = NewMethodName("PullRowsBatch");
    RawCall::Start(
        &releases_, NextStub().generic.get(), *method, ZeroCopySerializer(request),
        [request, response, outs](grpc::ByteBuffer* buffer) -> absl::Status {
          const int64_t expected = TotalBytes(outs);
          absl::StatusOr<int64_t> got = ParseWithBytesInto(
              *buffer, PullRowsBatchResponse::kDataFieldNumber, outs, response);
          if (!got.ok()) return got.status();
          if (*got != expected || response->pulls_size() != request->pulls_size()) {
            return absl::InternalError(absl::StrCat(
                "pull rows batch of ", request->pulls_size(), " items (first \"",
                request->pulls_size() > 0 ? request->pulls(0).shard() : "", "\") returned ",
                response->pulls_size(), " items and ", *got, " bytes, expected ", expected));
          }
          return absl::OkStatus();
        },
        deadline, std::move(done), LearnRowIdsBytes());
  }

  void PushRowsBatchAsync(const PushRowsBatchRequest* request, PushRowsBatchResponse* response,
                          absl::Time deadline, StatusCallback done) override {
    if (!peer_takes_row_batches_.load(std::memory_order_relaxed)) {
      return PsInterface::PushRowsBatchAsync(request, response, deadline, std::move(done));
    }
    static const std::string* const method = NewMethodName("PushRowsBatch");
    RawCall::Start(
        &releases_, NextStub().generic.get(), *method, ZeroCopySerializer(request),
        RawCall::ParseAs(response), deadline, std::move(done), LearnRowIdsBytes());
  }

  // The pulled bytes go from gRPC's receive slices straight into `outs`: one copy on this
  // side instead of three (into a response string, then out of it).
  void PullBatchAsync(const PullBatchRequest* request, PullBatchResponse* response,
                      absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                      StatusCallback done) override {
    if (static_cast<size_t>(request->pulls_size()) != outs.size()) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "pull batch of ", request->pulls_size(), " items has ", outs.size(), " outputs")));
    }
    static const std::string* const method = NewMethodName("PullBatch");
    RawCall::Start(
        &releases_, NextStub().generic.get(), *method, ZeroCopySerializer(request),
        [request, response, outs](grpc::ByteBuffer* buffer) -> absl::Status {
          const int64_t expected = TotalBytes(outs);
          absl::StatusOr<int64_t> got = ParseWithBytesInto(
              *buffer, PullBatchResponse::kDataFieldNumber, outs, response);
          if (!got.ok()) return got.status();
          if (*got != expected || response->pulls_size() != request->pulls_size()) {
            // Name the item that does not fit, when the ps says how much each one held.
            for (int i = 0; i < request->pulls_size() && i < response->pulls_size(); ++i) {
              const TensorShape& shape = response->pulls(i).shape();
              int64_t bytes = sizeof(float);
              for (int64_t d : shape.dim()) bytes *= d;
              if (bytes != static_cast<int64_t>(outs[i].size())) {
                return PulledSizeError(request->pulls(i), bytes,
                                       static_cast<int64_t>(outs[i].size()));
              }
            }
            return absl::InternalError(absl::StrCat(
                "pull batch of ", request->pulls_size(), " items returned ",
                response->pulls_size(), " items and ", *got, " bytes, expected ", expected));
          }
          return absl::OkStatus();
        },
        deadline, std::move(done));
  }

  // The gradients are sent from the caller's memory; small ones are copied, which is cheaper
  // than a slice of their own.
  void PushBatchAsync(const PushBatchRequest* request,
                      absl::Span<const absl::Span<const char>> data, PushBatchResponse* response,
                      absl::Time deadline, StatusCallback done) override {
    if (static_cast<size_t>(request->pushes_size()) != data.size()) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "push batch of ", request->pushes_size(), " items has ", data.size(), " gradients")));
    }
    static const std::string* const method = NewMethodName("PushBatch");
    RawCall::Start(
        &releases_, NextStub().generic.get(), *method,
        [request, data](std::shared_ptr<const void> keep_alive, grpc::ByteBuffer* buffer) {
          // The header names each item's length; the bytes follow as one field.
          PushBatchRequest header;
          *header.mutable_pushes() = request->pushes();
          std::vector<absl::string_view> segments;
          segments.reserve(data.size());
          for (absl::Span<const char> d : data) {
            header.add_data_bytes(static_cast<int64_t>(d.size()));
            segments.emplace_back(d.data(), d.size());
          }
          return SerializeZeroCopyWithBytes(header, PushBatchRequest::kDataFieldNumber,
                                            segments, std::move(keep_alive), buffer);
        },
        RawCall::ParseAs(response), deadline, std::move(done));
  }

 private:
  struct Stubs {
    std::unique_ptr<PsService::Stub> typed;
    std::unique_ptr<grpc::GenericStub> generic;
  };

  // A call on raw bytes, serialized and parsed by the caller's functions: the request's
  // tensor bytes are sent from where they lie (the request's own string, or the caller's
  // gradient), saving a copy into gRPC's slices (and their allocation), and a pulled tensor
  // can be parsed straight into its destination. Slices that point into caller memory may
  // outlive the call's completion (a write cancelled while it
  // is still in the transport), and the caller may free the request as soon as `done` runs,
  // so `done` waits for both: the call's completion and the release of the last slice.
  //
  // Owned jointly by the completion callback and the slices, through `keep_alive`; the last
  // to let go runs Release(), which deletes it and calls `done`.
  class RawCall {
   public:
    // Writes the request into a buffer; slices pointing into caller memory hold keep_alive.
    using Serializer = std::function<grpc::Status(std::shared_ptr<const void> keep_alive,
                                                  grpc::ByteBuffer* buffer)>;
    // Reads a successful call's response.
    using Parser = std::function<absl::Status(grpc::ByteBuffer* buffer)>;

    // Looks at a completed call's context (its server metadata) before the response is
    // parsed.
    using Inspector = std::function<void(grpc::ClientContext* ctx)>;

    // `releases` finishes the call when its last slice is let go inside gRPC's transport
    // (Release); it must outlive the call's `done`.
    static void Start(SerialExecutor* releases, grpc::GenericStub* stub,
                      const std::string& method, const Serializer& serialize, Parser parse,
                      absl::Time deadline, StatusCallback done, Inspector inspect = nullptr) {
      auto* call = new RawCall(releases, std::move(done), NewContext(deadline));
      std::shared_ptr<const void> keep_alive(call, [](const void* p) {
        Release(static_cast<RawCall*>(const_cast<void*>(p)));
      });
      grpc::Status serialized = serialize(keep_alive, &call->request_);
      if (!serialized.ok()) {
        call->status_ = FromGrpcStatus(serialized);
        Complete(std::move(keep_alive));
        return;
      }
      stub->UnaryCall(call->ctx_.get(), method, grpc::StubOptions(), &call->request_,
                      &call->response_,
                      [call, parse = std::move(parse), inspect = std::move(inspect),
                       keep_alive = std::move(keep_alive)](grpc::Status s) mutable {
                        if (inspect && s.ok()) {
                          inspect(call->ctx_.get());
                        }
                        call->status_ = FromGrpcStatus(s);
                        if (s.ok()) call->status_ = parse(&call->response_);
                        Complete(std::move(keep_alive));
                      });
    }

    // Parses the whole response as a `Response`.
    template <typename Response>
    static Parser ParseAs(Response* response) {
      return [response](grpc::ByteBuffer* buffer) {
        grpc::ProtoBufferReader reader(buffer);
        if (!response->ParseFromZeroCopyStream(&reader)) {
          return absl::InternalError(
              absl::StrCat("cannot parse the response as a ", response->GetTypeName()));
        }
        return absl::OkStatus();
      };
    }

   private:
    RawCall(SerialExecutor* releases, StatusCallback done, grpc::ClientContext* ctx)
        : releases_(releases), ctx_(ctx), done_(std::move(done)) {}

    // The call has completed: frees the context, and with it gRPC's call and the copy of the
    // request it kept, drops this side's buffers, then the completion's own reference.
    static void Complete(std::shared_ptr<const void> keep_alive) {
      auto* call = static_cast<RawCall*>(const_cast<void*>(keep_alive.get()));
      call->ctx_.reset();
      call->request_.Clear();
      call->response_.Clear();
      const bool outer = in_raw_completion;
      in_raw_completion = true;
      keep_alive.reset();
      in_raw_completion = outer;
    }

    // The last reference is gone. Usually that is the completion callback above, a thread on
    // which gRPC runs user callbacks. Otherwise it is a slice released deep inside gRPC's
    // transport, where neither user code nor the call's destruction may run: both move to
    // the interface's executor (a rare path: only calls that ended with their request
    // unsent).
    static void Release(RawCall* call) {
      if (in_raw_completion) {
        Finish(call);
        return;
      }
      call->releases_->Schedule([call] { Finish(call); });
    }

    // Deletes the call, then calls its `done` with its status.
    static void Finish(RawCall* call) {
      StatusCallback done = std::move(call->done_);
      absl::Status status = call->status_;
      delete call;
      done(status);
    }

    SerialExecutor* const releases_;

    std::unique_ptr<grpc::ClientContext> ctx_;
    grpc::ByteBuffer request_;
    grpc::ByteBuffer response_;
    absl::Status status_;
    StatusCallback done_;
  };

  // Serializes `request` as it is, its large bytes fields sent from where they lie.
  template <typename Request>
  static RawCall::Serializer ZeroCopySerializer(const Request* request) {
    return [request](std::shared_ptr<const void> keep_alive, grpc::ByteBuffer* buffer) {
      return SerializeZeroCopy(*request, std::move(keep_alive), buffer);
    };
  }

  // Serializes a row request as the ps reads it: as it is when the ps reads ids_bytes (or
  // the request has none), else with ids_bytes turned into the packed `ids` field (the row
  // gradients of a push still sent from the request's string).
  template <typename Request>
  RawCall::Serializer RowRequestSerializer(const Request* request) const {
    const bool raw_ids = request->ids_bytes().empty() ||
                         peer_reads_ids_bytes_.load(std::memory_order_relaxed);
    return [request, raw_ids](std::shared_ptr<const void> keep_alive, grpc::ByteBuffer* buffer) {
      if (raw_ids) return SerializeZeroCopy(*request, std::move(keep_alive), buffer);
      return SerializeWithPackedIds(*request, std::move(keep_alive), buffer);
    };
  }

  // A copy of `request` with ids_bytes turned into `ids` (and `data` left out).
  template <typename Request>
  static grpc::Status WithPackedIds(const Request& request, Request* header) {
    *header = request;
    header->clear_ids_bytes();
    const std::string& raw = request.ids_bytes();
    if (raw.size() % sizeof(int64_t) != 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("ids_bytes has ", raw.size(), " bytes, not a multiple of 8"));
    }
    header->mutable_ids()->Resize(static_cast<int>(raw.size() / sizeof(int64_t)), 0);
    if (!raw.empty()) std::memcpy(header->mutable_ids()->mutable_data(), raw.data(), raw.size());
    return grpc::Status::OK;
  }

  static grpc::Status SerializeWithPackedIds(const PullRowsRequest& request,
                                             std::shared_ptr<const void> keep_alive,
                                             grpc::ByteBuffer* buffer) {
    PullRowsRequest header;
    grpc::Status s = WithPackedIds(request, &header);
    if (!s.ok()) return s;
    return SerializeZeroCopy(header, std::move(keep_alive), buffer);
  }

  // The row gradients are still sent from the request's own string.
  static grpc::Status SerializeWithPackedIds(const PushRowsRequest& request,
                                             std::shared_ptr<const void> keep_alive,
                                             grpc::ByteBuffer* buffer) {
    PushRowsRequest header;
    grpc::Status s = WithPackedIds(request, &header);
    if (!s.ok()) return s;
    header.clear_data();
    const absl::string_view data = request.data();
    return SerializeZeroCopyWithBytes(header, PushRowsRequest::kDataFieldNumber,
                                      absl::MakeConstSpan(&data, 1), std::move(keep_alive),
                                      buffer);
  }

  // Notes, from a row reply's initial metadata, whether the ps reads ids_bytes. A ps that
  // restarts as an earlier release is noticed on its first reply.
  std::function<void(grpc::ClientContext*)> LearnRowIdsBytes() {
    return [this](grpc::ClientContext* ctx) {
      const auto& metadata = ctx->GetServerInitialMetadata();
      auto it = metadata.find(kRowIdsBytesMetadataKey);
      const bool reads = it != metadata.end() && it->second == "1";
      peer_reads_ids_bytes_.store(reads, std::memory_order_relaxed);
      auto batches = metadata.find(kRowBatchesMetadataKey);
      peer_takes_row_batches_.store(batches != metadata.end() && batches->second == "1",
                                    std::memory_order_relaxed);
    };
  }

  // Owned by the call: deleted in its completion callback (RawCall: owned by it, freed when
  // it completes).
  static grpc::ClientContext* NewContext(absl::Time deadline) {
    auto* ctx = new grpc::ClientContext;
    AttachProtocolVersion(ctx);
    if (deadline != absl::InfiniteFuture()) ctx->set_deadline(absl::ToChronoTime(deadline));
    return ctx;
  }

  const Stubs& NextStub() {
    return stubs_[next_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()];
  }

  const std::string name_;
  std::vector<Stubs> stubs_;
  // Whether the ps's last row reply said that it reads ids_bytes.
  std::atomic<bool> peer_reads_ids_bytes_{false};
  std::atomic<bool> peer_takes_row_batches_{false};  // kRowBatchesMetadataKey
  std::atomic<uint64_t> next_{0};
  // Finishes the raw calls whose last slice gRPC's transport let go (RawCall::Release).
  // Last: destroyed first, running what it still holds (by then every call's `done` has
  // run or is queued there: the caller keeps the interface until each call's `done`).
  SerialExecutor releases_;
};

}  // namespace

std::unique_ptr<PsInterface> NewGrpcPsInterface(const std::string& name,
                                                const std::string& address,
                                                int num_connections) {
  return std::make_unique<GrpcPsInterface>(name, address, num_connections);
}

}  // namespace shardps
