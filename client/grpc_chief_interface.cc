#include "client/grpc_chief_interface.h"

#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

class GrpcChiefInterface final : public ChiefInterface {
 public:
  explicit GrpcChiefInterface(const std::string& address)
      : address_(address), stub_(CoordinatorService::NewStub(NewChannel(address))) {}

  const std::string& address() const override { return address_; }

  absl::StatusOr<SubmitJobResponse> SubmitJob(const SubmitJobRequest& request,
                                              absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::SubmitJob, request, timeout);
  }
  absl::StatusOr<JobStatus> GetStatus(absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::GetStatus, GetStatusRequest(), timeout);
  }
  absl::StatusOr<AddStepsResponse> AddSteps(const AddStepsRequest& request,
                                            absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::AddSteps, request, timeout);
  }
  absl::Status CancelJob(const CancelJobRequest& request, absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::CancelJob, request, timeout).status();
  }
  absl::StatusOr<CheckpointInfo> Checkpoint(const CheckpointRequest& request,
                                            absl::Duration timeout) override {
    absl::StatusOr<CheckpointResponse> response =
        Call(&CoordinatorService::Stub::Checkpoint, request, timeout);
    if (!response.ok()) return response.status();
    return response->checkpoint();
  }
  absl::Status ReportEval(const ReportEvalRequest& request, absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::ReportEval, request, timeout).status();
  }
  absl::StatusOr<JoinJobResponse> JoinJob(const JoinJobRequest& request,
                                          absl::Duration timeout) override {
    // A worker often starts before its chief: the call waits for the connection (within
    // its timeout) rather than failing at once while the channel backs off.
    return Call(&CoordinatorService::Stub::JoinJob, request, timeout, /*wait_for_ready=*/true);
  }
  absl::StatusOr<ScalePsResponse> ScalePs(const ScalePsRequest& request,
                                          absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::ScalePs, request, timeout);
  }
  absl::StatusOr<MoveTableBucketsResponse> MoveTableBuckets(const MoveTableBucketsRequest& request,
                                                            absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::MoveTableBuckets, request, timeout);
  }

  absl::StatusOr<LeaveJobResponse> LeaveJob(const LeaveJobRequest& request,
                                            absl::Duration timeout) override {
    return Call(&CoordinatorService::Stub::LeaveJob, request, timeout);
  }

 private:
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(grpc::Status (CoordinatorService::Stub::*method)(
                                    grpc::ClientContext*, const Request&, Response*),
                                const Request& request, absl::Duration timeout,
                                bool wait_for_ready = false) {
    grpc::ClientContext context;
    AttachProtocolVersion(&context);
    context.set_wait_for_ready(wait_for_ready);
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    Response response;
    const grpc::Status status = (stub_.get()->*method)(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  const std::string address_;
  const std::unique_ptr<CoordinatorService::Stub> stub_;
};

}  // namespace

std::unique_ptr<ChiefInterface> NewGrpcChiefInterface(const std::string& address) {
  return std::make_unique<GrpcChiefInterface>(address);
}

}  // namespace shardps
