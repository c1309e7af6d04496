#include "ps_server/rpc/grpc_ps_service.h"

#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/support/message_allocator.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/call_gate.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

// The rows a pull asks for, only to choose the thread that serves it (the store checks the
// range itself): a range that is not 0 <= begin <= end counts as large, without the
// subtraction that could overflow on a stranger's values.
int64_t RowsAsked(int64_t begin, int64_t end) {
  if (begin < 0 || end < begin) return std::numeric_limits<int64_t>::max();
  return end - begin;
}

// Rows or ids up to this count are treated as a small request (see PsServiceOptions).
constexpr int64_t kInlineRows = 64;
// The same for a PullBatch's rows, all items together (a step's dense shards: ~1 MiB).
constexpr int64_t kInlineBatchRows = 2048;

// Recycles messages so that their `data` strings keep their capacity from call to call: a
// large request is then received into, and pulled rows gathered into, memory that is already
// allocated and faulted in, rather than a fresh allocation that the kernel zeroes page by page
// (the largest single cost of a bulk transfer before pooling). Keeps at most kMaxBytes of capacity and
// kMaxMessages messages; the rest are freed.
//
// Thread-safety: thread-safe.
template <typename T>
class MessagePool {
 public:
  std::unique_ptr<T> Get() {
    {
      absl::MutexLock lock(&mu_);
      if (!free_.empty()) {
        std::unique_ptr<T> message = std::move(free_.back());
        free_.pop_back();
        bytes_ -= message->data().capacity();
        return message;
      }
    }
    return std::make_unique<T>();
  }

  // Clears every field but `data`, whose size and capacity stay, so that a pull of the same
  // size neither reallocates nor zero-fills (the store overwrites every byte).
  void Put(std::unique_ptr<T> message) {
    std::string data;
    data.swap(*message->mutable_data());
    message->Clear();
    message->mutable_data()->swap(data);
    const size_t capacity = message->data().capacity();
    absl::MutexLock lock(&mu_);
    if (free_.size() < kMaxMessages && bytes_ + capacity <= kMaxBytes) {
      bytes_ += capacity;
      free_.push_back(std::move(message));
    }
  }  // A message the pool does not keep is freed here, after the lock is released.

 private:
  static constexpr size_t kMaxMessages = 64;
  static constexpr size_t kMaxBytes = size_t{96} << 20;

  absl::Mutex mu_;
  std::vector<std::unique_ptr<T>> free_ ABSL_GUARDED_BY(mu_);
  size_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// gRPC allocates the request and response of Push, PushRows and Assign through this, so that
// large requests are parsed into pooled messages (protobuf's parser clears a string but keeps
// its capacity).
template <typename Request, typename Response>
class PooledAllocator final : public grpc::MessageAllocator<Request, Response> {
 public:
  grpc::MessageHolder<Request, Response>* AllocateMessages() override {
    return new Holder(pool_, pool_->Get());
  }

 private:
  // Owned by gRPC's call from AllocateMessages until it calls Release(), once, after the
  // reactor has finished; Release returns the request to the pool and deletes the holder.
  class Holder final : public grpc::MessageHolder<Request, Response> {
   public:
    Holder(std::shared_ptr<MessagePool<Request>> pool, std::unique_ptr<Request> request)
        : pool_(std::move(pool)), request_(std::move(request)) {
      this->set_request(request_.get());
      this->set_response(&response_);
    }
    void Release() override {
      pool_->Put(std::move(request_));
      delete this;
    }

   private:
    const std::shared_ptr<MessagePool<Request>> pool_;
    std::unique_ptr<Request> request_;
    Response response_;
  };

  const std::shared_ptr<MessagePool<Request>> pool_ = std::make_shared<MessagePool<Request>>();
};

// A PullRows in progress: the parsed request and a pooled response. Shared by the handler,
// the store's completion and every slice of the serialized response that points into
// response->data(); the last of them returns the response to the pool.
struct PullRowsCall {
  explicit PullRowsCall(std::shared_ptr<MessagePool<PullRowsResponse>> response_pool)
      : pool(std::move(response_pool)), response(pool->Get()) {}
  ~PullRowsCall() { pool->Put(std::move(response)); }

  const std::shared_ptr<MessagePool<PullRowsResponse>> pool;
  PullRowsRequest request;
  std::unique_ptr<PullRowsResponse> response;
};

// A Pull in progress: the parsed request, the response (version and shape) and the pulled
// bytes, which stay in the shard's blocks. Shared by the handler, the store's completion and
// every slice of the serialized response; the last of them lets the blocks go.
struct PullCall {
  PullRequest request;
  PullResponse response;
  ShardStore::PulledBytes pulled;
};

// Pull, PullBatch and PullRows are raw methods. A pulled row range goes from the shard's
// parameter blocks to the socket without a copy (ShardStore::PulledBytes, serialized by
// SerializeZeroCopyWithBytes); pulled rows by id are gathered into a pooled response, sent by
// SerializeZeroCopy with no further copy.
//
// PushBatch is raw too: its gradient bytes are applied where gRPC received them (see
// PushBatchCall) instead of being copied into the request's string first.
using PsServiceBase = PsService::WithRawCallbackMethod_Pull<PsService::WithRawCallbackMethod_PullRows<
    PsService::WithRawCallbackMethod_PullBatch<PsService::WithRawCallbackMethod_PushBatch<
        PsService::WithRawCallbackMethod_PullRowsBatch<PsService::CallbackService>>>>>;

// A PushBatch in progress: the request without its data field, the data as views into gRPC's
// receive slices (held here, so they stay valid until the store is done), and the response.
struct PushBatchCall {
  std::vector<grpc::Slice> slices;
  std::vector<absl::string_view> data;
  PushBatchRequest request;
  PushBatchResponse response;
};

// A PullRowsBatch in progress: the parsed request and a pooled response per item, whose
// rows go out as the reply's one data field without a copy; as PullRowsCall, the last holder
// returns the responses to the pool.
struct PullRowsBatchCall {
  explicit PullRowsBatchCall(std::shared_ptr<MessagePool<PullRowsResponse>> response_pool)
      : pool(std::move(response_pool)) {}
  ~PullRowsBatchCall() {
    for (std::unique_ptr<PullRowsResponse>& response : responses) pool->Put(std::move(response));
  }

  const std::shared_ptr<MessagePool<PullRowsResponse>> pool;
  PullRowsBatchRequest request;
  std::vector<std::unique_ptr<PullRowsResponse>> responses;
};

// A PullBatch in progress: as PullCall, per item.
struct PullBatchCall {
  PullBatchRequest request;
  std::vector<PullResponse> responses;
  std::vector<ShardStore::PulledBytes> pulled;  // item i's bytes, in the shard's blocks
};

class GrpcPsService : public PsServiceBase {
 public:
  GrpcPsService(ShardStore* store, Executor* executor, PsServiceOptions options)
      : store_(store), executor_(executor), options_(std::move(options)) {
    SetMessageAllocatorFor_Push(&push_allocator_);
    SetMessageAllocatorFor_PushRows(&push_rows_allocator_);
    SetMessageAllocatorFor_Assign(&assign_allocator_);
  }

  // Each handler returns the context's default reactor; gRPC owns it and frees it after
  // Finish(). Work scheduled on the executor captures raw pointers to the request and
  // response, which gRPC keeps alive until Finish().

  grpc::ServerUnaryReactor* CreateShards(grpc::CallbackServerContext* ctx,
                                         const CreateShardsRequest* request,
                                         CreateShardsResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "CreateShards")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    Run(true, [=] { reactor->Finish(ToGrpcStatus(store_->CreateShards(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* ListShards(grpc::CallbackServerContext* ctx,
                                       const ListShardsRequest* request,
                                       ListShardsResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "ListShards")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(store_->ListShards(*request, response)));
    return reactor;
  }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx,
                                 const grpc::ByteBuffer* request_buffer,
                                 grpc::ByteBuffer* response_buffer) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Pull")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    auto call = std::make_shared<PullCall>();
    grpc::Status parsed = Parse(request_buffer, &call->request);
    if (!parsed.ok()) {
      reactor->Finish(parsed);
      return reactor;
    }
    const PullRequest& request = call->request;
    const int64_t rows = RowsAsked(request.row_begin(), request.row_end());
    bool large = request.row_end() == 0 || rows > kInlineRows;
    Run(large, [=] {
      store_->Pull(call->request, &call->response, &call->pulled,
                   [reactor, call, response_buffer](const absl::Status& s) {
                     if (!s.ok()) {
                       reactor->Finish(ToGrpcStatus(s));
                       return;
                     }
                     reactor->Finish(SerializeZeroCopyWithBytes(
                         call->response, PullResponse::kDataFieldNumber, call->pulled.pieces,
                         call, response_buffer));
                   });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const PushRequest* request,
                                 PushResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Push")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    Run(Large(request->data()), [=] {
      store_->AdmitPush(JobStepOf(*request), [=] {
        reactor->Finish(ToGrpcStatus(store_->Push(*request, response)));
      });
    });
    return reactor;
  }

  // Each item is pulled as by Pull; the reply carries every item's bytes, in order, as one
  // field whose slices point into the shards' parameter blocks.
  grpc::ServerUnaryReactor* PullBatch(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request_buffer,
                                      grpc::ByteBuffer* response_buffer) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "PullBatch")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    auto call = std::make_shared<PullBatchCall>();
    grpc::Status parsed = Parse(request_buffer, &call->request);
    if (!parsed.ok()) {
      reactor->Finish(parsed);
      return reactor;
    }
    int64_t rows = 0;
    bool whole = false;
    for (const PullRequest& item : call->request.pulls()) {
      const int64_t asked = RowsAsked(item.row_begin(), item.row_end());
      rows = asked > std::numeric_limits<int64_t>::max() - rows
                 ? std::numeric_limits<int64_t>::max()
                 : rows + asked;
      whole |= item.row_end() == 0;
    }
    // A step's small shards are copied on gRPC's thread: handing them to the executor costs
    // a thread wake-up, more than the copy. An empty batch is answered at once.
    Run(whole || rows > kInlineBatchRows, [this, reactor, call, response_buffer] {
      store_->PullBatch(call->request, &call->responses, &call->pulled,
                        [reactor, call, response_buffer](const absl::Status& s) {
                          ReplyBatch(reactor, s, call, response_buffer);
                        });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* PushBatch(grpc::CallbackServerContext* ctx,
                                      const grpc::ByteBuffer* request_buffer,
                                      grpc::ByteBuffer* response_buffer) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "PushBatch")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    auto call = std::make_shared<PushBatchCall>();
    absl::StatusOr<int64_t> bytes =
        ParseWithBytesInPlace(*request_buffer, PushBatchRequest::kDataFieldNumber, &call->slices,
                              &call->data, &call->request);
    if (!bytes.ok()) {
      reactor->Finish(ToGrpcStatus(bytes.status()));
      return reactor;
    }
    Run(*bytes > options_.inline_bytes, [reactor, call, response_buffer, this] {
      store_->AdmitPush(JobStepOf(call->request), [reactor, call, response_buffer, this] {
        const absl::Status s = store_->PushBatch(call->request, call->data, &call->response);
        Reply(reactor, s, call->response, call, response_buffer);
      });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* ctx,
                                     const grpc::ByteBuffer* request_buffer,
                                     grpc::ByteBuffer* response_buffer) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "PullRows")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    AdvertiseRowFeatures(ctx);
    auto call = std::make_shared<PullRowsCall>(pull_rows_pool_);
    grpc::Status parsed = Parse(request_buffer, &call->request);
    if (!parsed.ok()) {
      reactor->Finish(parsed);
      return reactor;
    }
    const int64_t ids = call->request.ids_size() +
                        static_cast<int64_t>(call->request.ids_bytes().size() / sizeof(int64_t));
    Run(ids > kInlineRows, [=] {
      store_->PullRows(call->request, call->response.get(),
                       [reactor, call, response_buffer](const absl::Status& s) {
                         Reply(reactor, s, *call->response, call, response_buffer);
                       });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* PushRows(grpc::CallbackServerContext* ctx,
                                     const PushRowsRequest* request,
                                     PushRowsResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "PushRows")) {
      return rejected;
    }
    AdvertiseRowFeatures(ctx);
    auto* reactor = ctx->DefaultReactor();
    Run(Large(request->data()), [=] {
      store_->AdmitPush(JobStepOf(*request), [=] {
        reactor->Finish(ToGrpcStatus(store_->PushRows(*request, response)));
      });
    });
    return reactor;
  }

  // Each item is pulled as by PullRows; the reply carries every item's rows, in order, as one
  // field whose slices point into the items' pooled responses.
  grpc::ServerUnaryReactor* PullRowsBatch(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* request_buffer,
                                          grpc::ByteBuffer* response_buffer) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "PullRowsBatch")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    AdvertiseRowFeatures(ctx);
    auto call = std::make_shared<PullRowsBatchCall>(pull_rows_pool_);
    grpc::Status parsed = Parse(request_buffer, &call->request);
    if (!parsed.ok()) {
      reactor->Finish(parsed);
      return reactor;
    }
    int64_t ids = 0;
    for (const PullRowsRequest& item : call->request.pulls()) {
      ids += item.ids_size() + static_cast<int64_t>(item.ids_bytes().size() / sizeof(int64_t));
    }
    Run(ids > kInlineBatchRows, [this, reactor, call, response_buffer] {
      std::vector<PullRowsResponse*> items;
      for (int i = 0; i < call->request.pulls_size(); ++i) {
        call->responses.push_back(call->pool->Get());
        items.push_back(call->responses.back().get());
      }
      store_->PullRowsBatch(call->request, items,
                            [reactor, call, response_buffer](const absl::Status& s) {
                              if (!s.ok()) {
                                reactor->Finish(ToGrpcStatus(s));
                                return;
                              }
                              PullRowsBatchResponse header;
                              std::vector<absl::string_view> segments;
                              for (const auto& item : call->responses) {
                                header.add_pulls()->set_version(item->version());
                                segments.push_back(item->data());
                              }
                              reactor->Finish(SerializeZeroCopyWithBytes(
                                  header, PullRowsBatchResponse::kDataFieldNumber, segments,
                                  call, response_buffer));
                            });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* PushRowsBatch(grpc::CallbackServerContext* ctx,
                                          const PushRowsBatchRequest* request,
                                          PushRowsBatchResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "PushRowsBatch")) {
      return rejected;
    }
    AdvertiseRowFeatures(ctx);
    auto* reactor = ctx->DefaultReactor();
    int64_t bytes = 0;
    for (const PushRowsRequest& item : request->pushes()) {
      bytes += static_cast<int64_t>(item.data().size());
    }
    Run(bytes > options_.inline_bytes, [=] {
      store_->AdmitPush(JobStepOf(*request), [=] {
        reactor->Finish(ToGrpcStatus(store_->PushRowsBatch(*request, response)));
      });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* Assign(grpc::CallbackServerContext* ctx,
                                   const AssignRequest* request,
                                   AssignResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Assign")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    Run(Large(request->data()),
        [=] { reactor->Finish(ToGrpcStatus(store_->Assign(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const HealthRequest* request,
                                   HealthResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Health")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    if (request->from_chief() && options_.on_chief_probe) options_.on_chief_probe();
    store_->Health(response);
    response->set_task_type(options_.task_type);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* SetGeneration(grpc::CallbackServerContext* ctx,
                                          const SetGenerationRequest* request,
                                          SetGenerationResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "SetGeneration")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(store_->SetGeneration(*request, response)));
    return reactor;
  }

  grpc::ServerUnaryReactor* DropShards(grpc::CallbackServerContext* ctx,
                                       const DropShardsRequest* request,
                                       DropShardsResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "DropShards")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    // Takes shard locks (and frees the shards' memory): off gRPC's thread.
    Run(true, [=] { reactor->Finish(ToGrpcStatus(store_->DropShards(*request, response))); });
    return reactor;
  }

  // Snapshot takes every shard's lock in turn; Restore reads the checkpoint from disk. Both
  // run on the executor, never on gRPC's threads.
  grpc::ServerUnaryReactor* Snapshot(grpc::CallbackServerContext* ctx,
                                     const SnapshotRequest* request,
                                     SnapshotResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Snapshot")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    Run(true, [=] { reactor->Finish(ToGrpcStatus(store_->Snapshot(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* HoldPushes(grpc::CallbackServerContext* ctx,
                                       const HoldPushesRequest* request,
                                       HoldPushesResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "HoldPushes")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(store_->HoldPushes(*request, response)));
    return reactor;
  }

  // A bucket move copies rows: on the executor, as a snapshot.
  grpc::ServerUnaryReactor* MoveBuckets(grpc::CallbackServerContext* ctx,
                                        const MoveBucketsRequest* request,
                                        MoveBucketsResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "MoveBuckets")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    Run(true, [=] { reactor->Finish(ToGrpcStatus(store_->MoveBuckets(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* SnapshotStatus(grpc::CallbackServerContext* ctx,
                                           const SnapshotStatusRequest* request,
                                           SnapshotStatusResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "SnapshotStatus")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(store_->SnapshotStatus(*request, response)));
    return reactor;
  }

  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* ctx,
                                    const RestoreRequest* request,
                                    RestoreResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Restore")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    Run(true, [=] { reactor->Finish(ToGrpcStatus(store_->Restore(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const ShutdownRequest* request,
                                     ShutdownResponse*) override {
    if (auto* rejected = AdmitCall(ctx, "ps", PsService::service_full_name(), "Shutdown")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    if (options_.on_shutdown) {
      // Off gRPC's thread, and after a moment, so that the reply goes out first.
      std::string reason = request->reason();
      executor_->Schedule([this, reason] { options_.on_shutdown(reason); });
    }
    return reactor;
  }

 private:
  // What a row call's reply tells the client this ps reads: raw ids, and batches of rows.
  static void AdvertiseRowFeatures(grpc::CallbackServerContext* ctx) {
    ctx->AddInitialMetadata(kRowIdsBytesMetadataKey, "1");
    ctx->AddInitialMetadata(kRowBatchesMetadataKey, "1");
  }

  // Parses a raw request as gRPC's own deserializer would.
  static grpc::Status Parse(const grpc::ByteBuffer* buffer,
                            google::protobuf::MessageLite* message) {
    // The reader only reads; it takes a non-const pointer for gRPC's C API.
    grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(buffer));
    if (!reader.status().ok()) return reader.status();
    if (!message->ParseFromZeroCopyStream(&reader)) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "cannot parse the request as a " + message->GetTypeName());
    }
    return grpc::Status::OK;
  }

  // Finishes a raw call: on success the response's bytes go out without a copy, and `call`
  // (which owns the response) lives until gRPC lets go of them.
  static void Reply(grpc::ServerUnaryReactor* reactor, const absl::Status& status,
                    const google::protobuf::MessageLite& response,
                    std::shared_ptr<const void> call, grpc::ByteBuffer* response_buffer) {
    if (!status.ok()) {
      reactor->Finish(ToGrpcStatus(status));
      return;
    }
    reactor->Finish(SerializeZeroCopy(response, std::move(call), response_buffer));
  }

  // Finishes a PullBatch once every item is in.
  static void ReplyBatch(grpc::ServerUnaryReactor* reactor, const absl::Status& status,
                         std::shared_ptr<PullBatchCall> call, grpc::ByteBuffer* response_buffer) {
    if (!status.ok()) {
      reactor->Finish(ToGrpcStatus(status));
      return;
    }
    PullBatchResponse header;
    std::vector<absl::string_view> segments;
    for (size_t i = 0; i < call->responses.size(); ++i) {
      const PullResponse& item = call->responses[i];
      PullResponse* meta = header.add_pulls();
      meta->set_version(item.version());
      *meta->mutable_shape() = item.shape();
      const auto& pieces = call->pulled[i].pieces;
      segments.insert(segments.end(), pieces.begin(), pieces.end());
    }
    reactor->Finish(SerializeZeroCopyWithBytes(header, PullBatchResponse::kDataFieldNumber,
                                               segments, std::move(call), response_buffer));
  }

  bool Large(const std::string& data) const {
    return static_cast<int64_t>(data.size()) > options_.inline_bytes;
  }

  template <typename Fn>
  void Run(bool large, Fn fn) {
    if (large) {
      executor_->Schedule(std::move(fn));
    } else {
      fn();
    }
  }

  ShardStore* const store_;
  Executor* const executor_;
  const PsServiceOptions options_;
  // Shared with calls in flight (and their slices), which may outlive the service.
  const std::shared_ptr<MessagePool<PullRowsResponse>> pull_rows_pool_ =
      std::make_shared<MessagePool<PullRowsResponse>>();
  PooledAllocator<PushRequest, PushResponse> push_allocator_;
  PooledAllocator<PushRowsRequest, PushRowsResponse> push_rows_allocator_;
  PooledAllocator<AssignRequest, AssignResponse> assign_allocator_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewGrpcPsService(ShardStore* store, Executor* executor,
                                                PsServiceOptions options) {
  return std::make_unique<GrpcPsService>(store, executor, std::move(options));
}

}  // namespace shardps
