#include "client/grpc_ps_interface.h"

#include <atomic>
#include <vector>

#include "grpcpp/client_context.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/grpc_util.h"

namespace shardps {
namespace {

class GrpcPsInterface : public PsInterface {
 public:
  GrpcPsInterface(const std::string& name, const std::string& address, int num_connections)
      : name_(name) {
    if (num_connections < 1) num_connections = 1;
    for (int i = 0; i < num_connections; ++i) {
      stubs_.push_back(PsService::NewStub(NewChannel(address, i)));
    }
  }

  const std::string& name() const override { return name_; }

#define SHARDPS_GRPC_METHOD(Method)                                                      \
  void Method##Async(const Method##Request* request, Method##Response* response,        \
                     absl::Time deadline, StatusCallback done) override {               \
    auto* ctx = NewContext(deadline);                                                    \
    NextStub()->async()->Method(ctx, request, response,                                  \
                                [ctx, done = std::move(done)](grpc::Status s) {          \
                                  delete ctx;                                            \
                                  done(FromGrpcStatus(s));                               \
                                });                                                      \
  }

  SHARDPS_GRPC_METHOD(CreateShards)
  SHARDPS_GRPC_METHOD(ListShards)
  SHARDPS_GRPC_METHOD(Pull)
  SHARDPS_GRPC_METHOD(Push)
  SHARDPS_GRPC_METHOD(PullRows)
  SHARDPS_GRPC_METHOD(PushRows)
  SHARDPS_GRPC_METHOD(Assign)
  SHARDPS_GRPC_METHOD(Health)
  SHARDPS_GRPC_METHOD(Shutdown)
#undef SHARDPS_GRPC_METHOD

 private:
  // Owned by the call: deleted in its completion callback.
  static grpc::ClientContext* NewContext(absl::Time deadline) {
    auto* ctx = new grpc::ClientContext;
    if (deadline != absl::InfiniteFuture()) ctx->set_deadline(absl::ToChronoTime(deadline));
    return ctx;
  }

  PsService::Stub* NextStub() {
    return stubs_[next_.fetch_add(1, std::memory_order_relaxed) % stubs_.size()].get();
  }

  const std::string name_;
  std::vector<std::unique_ptr<PsService::Stub>> stubs_;
  std::atomic<uint64_t> next_{0};
};

}  // namespace

std::unique_ptr<PsInterface> NewGrpcPsInterface(const std::string& name,
                                                const std::string& address,
                                                int num_connections) {
  return std::make_unique<GrpcPsInterface>(name, address, num_connections);
}

}  // namespace shardps
