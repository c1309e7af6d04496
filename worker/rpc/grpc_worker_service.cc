#include "worker/rpc/grpc_worker_service.h"

#include <utility>

#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/call_gate.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

class GrpcWorkerService : public WorkerService::CallbackService {
 public:
  GrpcWorkerService(StepExecutor* step_executor, Executor* executor, WorkerServiceOptions options)
      : step_executor_(step_executor), executor_(executor), options_(std::move(options)) {}

  // Each handler returns the context's default reactor; gRPC owns it and frees it after
  // Finish(). Work scheduled on the executor captures raw pointers to the request, response
  // and reactor, which gRPC keeps alive until Finish().

  grpc::ServerUnaryReactor* StartJob(grpc::CallbackServerContext* ctx,
                                     const StartJobRequest* request,
                                     StartJobResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "worker", WorkerService::service_full_name(), "StartJob")) {
      return rejected;
    }
    NoteChiefCall();
    auto* reactor = ctx->DefaultReactor();
    executor_->Schedule([this, reactor, request, response] {
      absl::StatusOr<StartJobResponse> result = step_executor_->StartJob(*request);
      if (result.ok()) *response = *std::move(result);
      reactor->Finish(ToGrpcStatus(result.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* RunStep(grpc::CallbackServerContext* ctx, const StepRequest* request,
                                    StepResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "worker", WorkerService::service_full_name(), "RunStep")) {
      return rejected;
    }
    NoteChiefCall();
    auto* reactor = ctx->DefaultReactor();
    executor_->Schedule([this, reactor, request, response] {
      absl::StatusOr<StepResponse> result = step_executor_->RunStep(*request);
      if (result.ok()) *response = *std::move(result);
      reactor->Finish(ToGrpcStatus(result.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx, const WorkerStatusRequest*,
                                   WorkerStatusResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "worker", WorkerService::service_full_name(), "Status")) {
      return rejected;
    }
    NoteChiefCall();
    auto* reactor = ctx->DefaultReactor();
    *response = step_executor_->Status();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* Shutdown(grpc::CallbackServerContext* ctx,
                                     const WorkerShutdownRequest* request,
                                     WorkerShutdownResponse*) override {
    if (auto* rejected = AdmitCall(ctx, "worker", WorkerService::service_full_name(), "Shutdown")) {
      return rejected;
    }
    NoteChiefCall();
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    if (options_.on_shutdown) {
      // Off gRPC's thread; the server lets this reply go out before it stops.
      executor_->Schedule([this, reason = request->reason()] { options_.on_shutdown(reason); });
    }
    return reactor;
  }

 private:
  void NoteChiefCall() {
    if (options_.on_chief_call) options_.on_chief_call();
  }

  StepExecutor* const step_executor_;
  Executor* const executor_;
  const WorkerServiceOptions options_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewGrpcWorkerService(StepExecutor* step_executor, Executor* executor,
                                                    WorkerServiceOptions options) {
  return std::make_unique<GrpcWorkerService>(step_executor, executor, std::move(options));
}

}  // namespace shardps
