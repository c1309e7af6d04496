// GrpcWorkerInterface over real gRPC, against a WorkerService on 127.0.0.1:0 whose RunStep
// never answers: CancelAll brings such a call back at once, CANCELLED, and the worker sees
// the cancellation; calls started afterwards are not affected.
#include "coordinator/rpc/grpc_worker_interface.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"

namespace shardps {
namespace {

constexpr absl::Duration kWait = absl::Seconds(20);

// A worker whose RunStep holds every call until its client cancels it (or the server shuts
// down) and whose Status answers at once.
class HoldingWorker final : public WorkerService::CallbackService {
 public:
  HoldingWorker() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~HoldingWorker() override { server_->Shutdown(absl::ToChronoTime(absl::Now())); }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  int held() {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  int cancelled() {
    absl::MutexLock lock(&mu_);
    return cancelled_;
  }
  bool WaitForHeld(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return held_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }
  bool WaitForCancelled(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return cancelled_ >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kWait);
  }

  grpc::ServerUnaryReactor* RunStep(grpc::CallbackServerContext*, const StepRequest*,
                                    StepResponse*) override {
    absl::MutexLock lock(&mu_);
    ++held_;
    return new Held(this);
  }
  grpc::ServerUnaryReactor* Status(grpc::CallbackServerContext* ctx, const WorkerStatusRequest*,
                                   WorkerStatusResponse*) override {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  // Finishes only when the call is cancelled; deletes itself once gRPC is done with it.
  class Held : public grpc::ServerUnaryReactor {
   public:
    explicit Held(HoldingWorker* worker) : worker_(worker) {}
    void OnCancel() override {
      {
        absl::MutexLock lock(&worker_->mu_);
        ++worker_->cancelled_;
      }
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
    void OnDone() override { delete this; }

   private:
    HoldingWorker* const worker_;
  };

  absl::Mutex mu_;
  int held_ ABSL_GUARDED_BY(mu_) = 0;
  int cancelled_ ABSL_GUARDED_BY(mu_) = 0;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// One call's outcome.
struct Outcome {
  absl::Notification done;
  absl::Status status;
};

TEST(GrpcWorkerInterfaceTest, CancelAllBringsBackEveryCallInFlightCancelled) {
  HoldingWorker worker;
  std::unique_ptr<WorkerInterface> w = NewGrpcWorkerInterface(worker.address());
  w->CancelAll();  // nothing in flight: nothing happens
  StepRequest requests[2];
  StepResponse responses[2];
  Outcome outcomes[2];
  for (int i = 0; i < 2; ++i) {
    Outcome* o = &outcomes[i];
    w->RunStepAsync(&requests[i], &responses[i], absl::Now() + absl::Seconds(60),
                    [o](const absl::Status& s) {
                      o->status = s;
                      o->done.Notify();
                    });
  }
  ASSERT_TRUE(worker.WaitForHeld(2));
  EXPECT_FALSE(outcomes[0].done.HasBeenNotified());

  const absl::Time t0 = absl::Now();
  w->CancelAll();
  for (Outcome& o : outcomes) {
    ASSERT_TRUE(o.done.WaitForNotificationWithTimeout(kWait));
    EXPECT_EQ(o.status.code(), absl::StatusCode::kCancelled) << o.status;
  }
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  EXPECT_TRUE(worker.WaitForCancelled(2));  // the worker was told, not just the chief

  // A call started after the cancel goes through.
  WorkerStatusRequest request;
  WorkerStatusResponse response;
  Outcome after;
  w->StatusAsync(&request, &response, absl::Now() + absl::Seconds(60),
                 [&after](const absl::Status& s) {
                   after.status = s;
                   after.done.Notify();
                 });
  ASSERT_TRUE(after.done.WaitForNotificationWithTimeout(kWait));
  EXPECT_TRUE(after.status.ok()) << after.status;
}

// A call that has not reached the worker yet when CancelAll runs is cancelled too.
TEST(GrpcWorkerInterfaceTest, ACallCancelledAsItStartsComesBackCancelled) {
  HoldingWorker worker;
  std::unique_ptr<WorkerInterface> w = NewGrpcWorkerInterface(worker.address());
  StepRequest request;
  StepResponse response;
  Outcome outcome;
  w->RunStepAsync(&request, &response, absl::Now() + absl::Seconds(60),
                  [&outcome](const absl::Status& s) {
                    outcome.status = s;
                    outcome.done.Notify();
                  });
  w->CancelAll();
  ASSERT_TRUE(outcome.done.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(outcome.status.code(), absl::StatusCode::kCancelled) << outcome.status;
}

}  // namespace
}  // namespace shardps
