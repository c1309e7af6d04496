#include "coordinator/rpc/grpc_worker_interface.h"

#include "grpcpp/client_context.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

class GrpcWorkerInterface : public WorkerInterface {
 public:
  explicit GrpcWorkerInterface(const std::string& address)
      : address_(address), stub_(WorkerService::NewStub(NewChannel(address))) {}

  const std::string& address() const override { return address_; }

  void StartJobAsync(const StartJobRequest* request, StartJobResponse* response,
                     absl::Time deadline, StatusCallback done) override {
    auto* ctx = NewContext(deadline);
    stub_->async()->StartJob(ctx, request, response, Finisher(ctx, std::move(done)));
  }
  void RunStepAsync(const StepRequest* request, StepResponse* response, absl::Time deadline,
                    StatusCallback done) override {
    auto* ctx = NewContext(deadline);
    stub_->async()->RunStep(ctx, request, response, Finisher(ctx, std::move(done)));
  }
  void StatusAsync(const WorkerStatusRequest* request, WorkerStatusResponse* response,
                   absl::Time deadline, StatusCallback done) override {
    auto* ctx = NewContext(deadline);
    stub_->async()->Status(ctx, request, response, Finisher(ctx, std::move(done)));
  }
  void ShutdownAsync(const WorkerShutdownRequest* request, WorkerShutdownResponse* response,
                     absl::Time deadline, StatusCallback done) override {
    auto* ctx = NewContext(deadline);
    stub_->async()->Shutdown(ctx, request, response, Finisher(ctx, std::move(done)));
  }

 private:
  // The context is owned by the call and deleted when it completes.
  static grpc::ClientContext* NewContext(absl::Time deadline) {
    auto* ctx = new grpc::ClientContext;
    AttachProtocolVersion(ctx);
    ctx->set_deadline(absl::ToChronoTime(deadline));
    return ctx;
  }
  static std::function<void(grpc::Status)> Finisher(grpc::ClientContext* ctx,
                                                    StatusCallback done) {
    return [ctx, done = std::move(done)](grpc::Status s) {
      delete ctx;
      done(FromGrpcStatus(s));
    };
  }

  const std::string address_;
  std::unique_ptr<WorkerService::Stub> stub_;
};

}  // namespace

std::unique_ptr<WorkerInterface> NewGrpcWorkerInterface(const std::string& address) {
  return std::make_unique<GrpcWorkerInterface>(address);
}

}  // namespace shardps
