#include "evaluator/rpc/grpc_chief_link.h"

#include "client/grpc_chief_interface.h"

namespace shardps {
namespace {

// The evaluator's two calls, each bounded by `call_timeout`, over the chief client.
class GrpcChiefLink : public ChiefLink {
 public:
  GrpcChiefLink(const std::string& address, absl::Duration call_timeout)
      : chief_(NewGrpcChiefInterface(address)), call_timeout_(call_timeout) {}

  absl::StatusOr<JobStatus> GetStatus() override { return chief_->GetStatus(call_timeout_); }

  absl::Status ReportEval(const ReportEvalRequest& request) override {
    return chief_->ReportEval(request, call_timeout_);
  }

 private:
  const std::unique_ptr<ChiefInterface> chief_;
  const absl::Duration call_timeout_;
};

}  // namespace

std::unique_ptr<ChiefLink> NewGrpcChiefLink(const std::string& address,
                                            absl::Duration call_timeout) {
  return std::make_unique<GrpcChiefLink>(address, call_timeout);
}

}  // namespace shardps
