#include "ps_server/rpc/grpc_ps_service.h"

#include <thread>

#include "proto/ps.grpc.pb.h"
#include "rpc/grpc_util.h"

namespace shardps {
namespace {

// Rows or ids up to this count are treated as a small request (see PsServiceOptions).
constexpr int64_t kInlineRows = 64;

class GrpcPsService : public PsService::CallbackService {
 public:
  GrpcPsService(ShardStore* store, Executor* executor, PsServiceOptions options)
      : store_(store), executor_(executor), options_(std::move(options)) {}

  // Each handler returns the context's default reactor; gRPC owns it and frees it after
  // Finish(). Work scheduled on the executor captures raw pointers to the request and
  // response, which gRPC keeps alive until Finish().

  grpc::ServerUnaryReactor* CreateShards(grpc::CallbackServerContext* ctx,
                                         const CreateShardsRequest* request,
                                         CreateShardsResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    Run(true, [=] { reactor->Finish(ToGrpcStatus(store_->CreateShards(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* ListShards(grpc::CallbackServerContext* ctx,
                                       const ListShardsRequest* request,
                                       ListShardsResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(store_->ListShards(*request, response)));
    return reactor;
  }

  grpc::ServerUnaryReactor* Pull(grpc::CallbackServerContext* ctx, const PullRequest* request,
                                 PullResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    int64_t rows = request->row_end() - request->row_begin();
    bool large = request->row_end() == 0 || rows > kInlineRows;
    Run(large, [=] {
      store_->Pull(*request, response,
                   [reactor](const absl::Status& s) { reactor->Finish(ToGrpcStatus(s)); });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* Push(grpc::CallbackServerContext* ctx, const PushRequest* request,
                                 PushResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    Run(Large(request->data()),
        [=] { reactor->Finish(ToGrpcStatus(store_->Push(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* ctx,
                                     const PullRowsRequest* request,
                                     PullRowsResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    Run(request->ids_size() > kInlineRows, [=] {
      store_->PullRows(*request, response,
                       [reactor](const absl::Status& s) { reactor->Finish(ToGrpcStatus(s)); });
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* PushRows(grpc::CallbackServerContext* ctx,
                                     const PushRowsRequest* request,
                                     PushRowsResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    Run(Large(request->data()),
        [=] { reactor->Finish(ToGrpcStatus(store_->PushRows(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* Assign(grpc::CallbackServerContext* ctx,
                                   const AssignRequest* request,
                                   AssignResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    Run(Large(request->data()),
        [=] { reactor->Finish(ToGrpcStatus(store_->Assign(*request, response))); });
    return reactor;
  }

  grpc::ServerUnaryReactor* Health(grpc::CallbackServerContext* ctx, const HealthRequest*,
                                   HealthResponse* response) override {
    auto* reactor = ctx->DefaultReactor();
    store_->Health(response);
    response->set_task_type(options_.task_type);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const ShutdownRequest* request,
                                     ShutdownResponse*) override {
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
};

}  // namespace

std::unique_ptr<grpc::Service> NewGrpcPsService(ShardStore* store, Executor* executor,
                                                PsServiceOptions options) {
  return std::make_unique<GrpcPsService>(store, executor, std::move(options));
}

}  // namespace shardps
