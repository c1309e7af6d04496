#include "evaluator/rpc/grpc_chief_link.h"

#include "absl/time/clock.h"
#include "grpcpp/client_context.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

class GrpcChiefLink : public ChiefLink {
 public:
  GrpcChiefLink(const std::string& address, absl::Duration call_timeout)
      : stub_(CoordinatorService::NewStub(NewChannel(address))), call_timeout_(call_timeout) {}

  absl::StatusOr<JobStatus> GetStatus() override {
    grpc::ClientContext ctx;
    AttachProtocolVersion(&ctx);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout_));
    JobStatus status;
    grpc::Status s = stub_->GetStatus(&ctx, GetStatusRequest(), &status);
    if (!s.ok()) return FromGrpcStatus(s);
    return status;
  }

  absl::Status ReportEval(const ReportEvalRequest& request) override {
    grpc::ClientContext ctx;
    AttachProtocolVersion(&ctx);
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + call_timeout_));
    ReportEvalResponse response;
    return FromGrpcStatus(stub_->ReportEval(&ctx, request, &response));
  }

 private:
  const std::unique_ptr<CoordinatorService::Stub> stub_;
  const absl::Duration call_timeout_;
};

}  // namespace

std::unique_ptr<ChiefLink> NewGrpcChiefLink(const std::string& address,
                                            absl::Duration call_timeout) {
  return std::make_unique<GrpcChiefLink>(address, call_timeout);
}

}  // namespace shardps
