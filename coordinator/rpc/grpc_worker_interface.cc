#include "coordinator/rpc/grpc_worker_interface.h"

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/client_context.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

using ContextPtr = std::shared_ptr<grpc::ClientContext>;

// The contexts of the calls in flight, so that CancelAll can reach them. Shared by the
// interface and each call's completion: a completion never touches the interface itself.
class CallsInFlight {
 public:
  void Add(const ContextPtr& ctx) {
    absl::MutexLock lock(&mu_);
    calls_.insert(ctx);
  }
  void Remove(const ContextPtr& ctx) {
    absl::MutexLock lock(&mu_);
    calls_.erase(ctx);
  }
  void CancelAll() {
    std::vector<ContextPtr> calls;
    {
      absl::MutexLock lock(&mu_);
      calls.assign(calls_.begin(), calls_.end());
    }
    // Outside the lock: a cancelled call's completion (which calls Remove) may run on this
    // thread, inside TryCancel. The copies keep each context alive until it is cancelled,
    // even if its call completes meanwhile; TryCancel of a completed call does nothing.
    for (const ContextPtr& ctx : calls) ctx->TryCancel();
  }

 private:
  absl::Mutex mu_;
  absl::flat_hash_set<ContextPtr> calls_ ABSL_GUARDED_BY(mu_);
};

class GrpcWorkerInterface : public WorkerInterface {
 public:
  explicit GrpcWorkerInterface(const std::string& address)
      : address_(address), stub_(WorkerService::NewStub(NewChannel(address))) {}

  const std::string& address() const override { return address_; }

  void StartJobAsync(const StartJobRequest* request, StartJobResponse* response,
                     absl::Time deadline, StatusCallback done) override {
    Call(deadline, std::move(done), [&](grpc::ClientContext* ctx, Completion completion) {
      stub_->async()->StartJob(ctx, request, response, std::move(completion));
    });
  }
  void RunStepAsync(const StepRequest* request, StepResponse* response, absl::Time deadline,
                    StatusCallback done) override {
    Call(deadline, std::move(done), [&](grpc::ClientContext* ctx, Completion completion) {
      stub_->async()->RunStep(ctx, request, response, std::move(completion));
    });
  }
  void StatusAsync(const WorkerStatusRequest* request, WorkerStatusResponse* response,
                   absl::Time deadline, StatusCallback done) override {
    Call(deadline, std::move(done), [&](grpc::ClientContext* ctx, Completion completion) {
      stub_->async()->Status(ctx, request, response, std::move(completion));
    });
  }
  void ShutdownAsync(const WorkerShutdownRequest* request, WorkerShutdownResponse* response,
                     absl::Time deadline, StatusCallback done) override {
    Call(deadline, std::move(done), [&](grpc::ClientContext* ctx, Completion completion) {
      stub_->async()->Shutdown(ctx, request, response, std::move(completion));
    });
  }

  void CancelAll() override { calls_->CancelAll(); }

 private:
  using Completion = std::function<void(grpc::Status)>;

  // Starts one call through `start` (which hands the context and the completion to the
  // stub). The context is registered before the call starts (a cancel that comes first
  // cancels the call as it starts) and goes when the call completes, before `done` runs.
  template <typename Start>
  void Call(absl::Time deadline, StatusCallback done, Start start) {
    auto ctx = std::make_shared<grpc::ClientContext>();
    AttachProtocolVersion(ctx.get());
    ctx->set_deadline(absl::ToChronoTime(deadline));
    calls_->Add(ctx);
    start(ctx.get(),
          [calls = calls_, ctx, done = std::move(done)](grpc::Status s) mutable {
            calls->Remove(ctx);
            ctx.reset();
            done(FromGrpcStatus(s));
          });
  }

  const std::string address_;
  std::unique_ptr<WorkerService::Stub> stub_;
  const std::shared_ptr<CallsInFlight> calls_ = std::make_shared<CallsInFlight>();
};

}  // namespace

std::unique_ptr<WorkerInterface> NewGrpcWorkerInterface(const std::string& address) {
  return std::make_unique<GrpcWorkerInterface>(address);
}

}  // namespace shardps
