#include "coordinator/rpc/grpc_coordinator_service.h"

#include "proto/coordinator.grpc.pb.h"
#include "rpc/executor.h"
#include "rpc/grpc_util.h"
#include "rpc/call_gate.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

class GrpcCoordinatorService : public CoordinatorService::CallbackService {
 public:
  explicit GrpcCoordinatorService(Chief* chief)
      : chief_(chief), submissions_(2), leaves_(4) {}

  // Handlers return the context's default reactor, owned by gRPC and freed after Finish().
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const SubmitJobRequest* request,
                                      SubmitJobResponse* response) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "SubmitJob")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    // Submission loads the dataset and creates variables: not on gRPC's thread. The request
    // and response live until Finish.
    submissions_.Schedule([this, reactor, request, response] {
      absl::StatusOr<SubmitJobResponse> r =
          chief_->Submit(request->job_json(), request->resume());
      if (r.ok()) *response = *r;
      reactor->Finish(ToGrpcStatus(r.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx, const GetStatusRequest*,
                                      JobStatus* response) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "GetStatus")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    *response = chief_->Status();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

  grpc::ServerUnaryReactor* AddSteps(grpc::CallbackServerContext* ctx,
                                     const AddStepsRequest* request,
                                     AddStepsResponse* response) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "AddSteps")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    absl::StatusOr<int64_t> total = chief_->AddSteps(request->job_id(), request->steps());
    if (total.ok()) response->set_total_steps(*total);
    reactor->Finish(ToGrpcStatus(total.status()));
    return reactor;
  }

  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const CancelJobRequest* request,
                                      CancelJobResponse*) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "CancelJob")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(chief_->Cancel(request->job_id())));
    return reactor;
  }

  grpc::ServerUnaryReactor* ReportEval(grpc::CallbackServerContext* ctx,
                                       const ReportEvalRequest* request,
                                       ReportEvalResponse*) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "ReportEval")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(ToGrpcStatus(chief_->ReportEval(*request)));
    return reactor;
  }

  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* ctx,
                                       const CheckpointRequest* request,
                                       CheckpointResponse* response) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "Checkpoint")) {
      return rejected;
    }
    // The reactor is gRPC's, finished by the chief's control thread once the checkpoint is
    // committed (or failed); the request and response live until Finish.
    auto* reactor = ctx->DefaultReactor();
    chief_->Checkpoint(request->job_id(),
                       [reactor, response](absl::StatusOr<CheckpointInfo> info) {
                         if (info.ok()) *response->mutable_checkpoint() = *info;
                         reactor->Finish(ToGrpcStatus(info.status()));
                       });
    return reactor;
  }

  grpc::ServerUnaryReactor* JoinJob(grpc::CallbackServerContext* ctx,
                                    const JoinJobRequest* request,
                                    JoinJobResponse* response) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "JoinJob")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    absl::StatusOr<JoinJobResponse> r = chief_->Join(*request);
    if (r.ok()) *response = *r;
    reactor->Finish(ToGrpcStatus(r.status()));
    return reactor;
  }

  grpc::ServerUnaryReactor* LeaveJob(grpc::CallbackServerContext* ctx,
                                     const LeaveJobRequest* request,
                                     LeaveJobResponse* response) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "LeaveJob")) {
      return rejected;
    }
    auto* reactor = ctx->DefaultReactor();
    // Waits for the worker's steps in flight: not on gRPC's thread.
    leaves_.Schedule([this, reactor, request, response] {
      absl::StatusOr<LeaveJobResponse> r = chief_->Leave(*request);
      if (r.ok()) *response = *r;
      reactor->Finish(ToGrpcStatus(r.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* ScalePs(grpc::CallbackServerContext* ctx,
                                    const ScalePsRequest* request,
                                    ScalePsResponse* response) override {
    if (auto* rejected =
            AdmitCall(ctx, "chief", CoordinatorService::service_full_name(), "ScalePs")) {
      return rejected;
    }
    // Finished by the chief's control thread once training resumed on the new ps (or the
    // scale failed); the request and response live until Finish.
    auto* reactor = ctx->DefaultReactor();
    chief_->ScalePs(*request, [reactor, response](absl::StatusOr<ScalePsResponse> r) {
      if (r.ok()) *response = *r;
      reactor->Finish(ToGrpcStatus(r.status()));
    });
    return reactor;
  }

  grpc::ServerUnaryReactor* MoveTableBuckets(grpc::CallbackServerContext* ctx,
                                             const MoveTableBucketsRequest* request,
                                             MoveTableBucketsResponse* response) override {
    if (auto* rejected = AdmitCall(ctx, "chief", CoordinatorService::service_full_name(),
                                   "MoveTableBuckets")) {
      return rejected;
    }
    // Finished by the chief's control thread once the buckets moved (or the move failed).
    auto* reactor = ctx->DefaultReactor();
    chief_->MoveTableBuckets(*request,
                             [reactor, response](absl::StatusOr<MoveTableBucketsResponse> r) {
                               if (r.ok()) *response = *r;
                               reactor->Finish(ToGrpcStatus(r.status()));
                             });
    return reactor;
  }

 private:
  Chief* const chief_;
  // Runs submissions: one prepares a job, the other answers a concurrent one (refused at
  // once while a job starts or runs; one that follows a job's end waits for its calls to
  // drain). Destroyed, and so joined, with the service: after the server, which waits for
  // every call to finish, and before the chief.
  Executor submissions_;
  // Runs LeaveJob calls, each waiting for its worker's steps (several workers may leave at
  // once, a StatefulSet scaled down).
  Executor leaves_;
};

}  // namespace

std::unique_ptr<grpc::Service> NewGrpcCoordinatorService(Chief* chief) {
  return std::make_unique<GrpcCoordinatorService>(chief);
}

}  // namespace shardps
