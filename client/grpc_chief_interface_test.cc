// GrpcChiefInterface over real gRPC, against a scripted CoordinatorService on 127.0.0.1:0:
// each call reaches the chief with the protocol version and its answer comes back; the
// chief's errors keep their codes; an unreachable chief is UNAVAILABLE and a silent one
// DEADLINE_EXCEEDED; WaitFor polls over the wire.
#include "client/grpc_chief_interface.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kTimeout = absl::Seconds(10);

// Answers from a script and remembers what it was asked. Every handler refuses a call
// without the protocol version, as the chief does. Checkpoint never answers while `hold` is
// set (its reactor is finished when the chief goes).
class ScriptedChief final : public CoordinatorService::CallbackService {
 public:
  ScriptedChief() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~ScriptedChief() override {
    {
      absl::MutexLock lock(&mu_);
      if (held_ != nullptr) held_->Finish(grpc::Status(grpc::StatusCode::CANCELLED, "gone"));
      held_ = nullptr;
    }
    server_->Shutdown();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  void Hold() {
    absl::MutexLock lock(&mu_);
    hold_ = true;
  }
  std::string last_call() {
    absl::MutexLock lock(&mu_);
    return last_call_;
  }

  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* ctx,
                                      const SubmitJobRequest* request,
                                      SubmitJobResponse* response) override {
    if (auto* rejected = RejectIncompatibleClient(ctx, "chief")) return rejected;
    Note(absl::StrCat("SubmitJob ", request->job_json(), " ",
                      SubmitJobRequest::Resume_Name(request->resume())));
    if (request->job_json() == "bad") {
      return Finish(ctx, grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job: \"mode\": bad"));
    }
    response->set_job_id("job-7");
    response->set_total_steps(120);
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* ctx, const GetStatusRequest*,
                                      JobStatus* response) override {
    if (auto* rejected = RejectIncompatibleClient(ctx, "chief")) return rejected;
    int64_t polls;
    {
      absl::MutexLock lock(&mu_);
      polls = ++polls_;
    }
    response->set_state(JobStatus::RUNNING);
    response->set_job_id("job-7");
    response->set_steps_done(10 * polls);
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* AddSteps(grpc::CallbackServerContext* ctx,
                                     const AddStepsRequest* request,
                                     AddStepsResponse* response) override {
    if (auto* rejected = RejectIncompatibleClient(ctx, "chief")) return rejected;
    Note(absl::StrCat("AddSteps ", request->job_id(), " ", request->steps()));
    response->set_total_steps(120 + request->steps());
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* ctx,
                                      const CancelJobRequest* request,
                                      CancelJobResponse*) override {
    if (auto* rejected = RejectIncompatibleClient(ctx, "chief")) return rejected;
    Note(absl::StrCat("CancelJob ", request->job_id()));
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* ReportEval(grpc::CallbackServerContext* ctx,
                                       const ReportEvalRequest* request,
                                       ReportEvalResponse*) override {
    if (auto* rejected = RejectIncompatibleClient(ctx, "chief")) return rejected;
    Note(absl::StrCat("ReportEval ", request->job_id(), " ", request->result().accuracy(),
                      request->final() ? " final" : ""));
    if (request->job_id() != "job-7") {
      return Finish(ctx, grpc::Status(grpc::StatusCode::NOT_FOUND, "no job old-1"));
    }
    return Finish(ctx, grpc::Status::OK);
  }
  grpc::ServerUnaryReactor* Checkpoint(grpc::CallbackServerContext* ctx,
                                       const CheckpointRequest* request,
                                       CheckpointResponse* response) override {
    if (auto* rejected = RejectIncompatibleClient(ctx, "chief")) return rejected;
    Note(absl::StrCat("Checkpoint ", request->job_id()));
    absl::MutexLock lock(&mu_);
    if (hold_) {
      held_ = ctx->DefaultReactor();
      return held_;
    }
    response->mutable_checkpoint()->set_id(3);
    response->mutable_checkpoint()->set_steps_done(40);
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  static grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx,
                                          const grpc::Status& status) {
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(status);
    return reactor;
  }
  void Note(std::string call) {
    absl::MutexLock lock(&mu_);
    last_call_ = std::move(call);
  }

  absl::Mutex mu_;
  std::string last_call_ ABSL_GUARDED_BY(mu_);
  int64_t polls_ ABSL_GUARDED_BY(mu_) = 0;
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  grpc::ServerUnaryReactor* held_ ABSL_GUARDED_BY(mu_) = nullptr;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

TEST(GrpcChiefInterfaceTest, EveryCallReachesTheChiefAndItsAnswerComesBack) {
  ScriptedChief server;
  std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(server.address());
  EXPECT_EQ(chief->address(), server.address());

  SubmitJobRequest submit;
  submit.set_job_json("{}");
  submit.set_resume(SubmitJobRequest::FRESH);
  auto submitted = chief->SubmitJob(submit, kTimeout);
  ASSERT_TRUE(submitted.ok()) << submitted.status();
  EXPECT_EQ(submitted->job_id(), "job-7");
  EXPECT_EQ(server.last_call(), "SubmitJob {} FRESH");

  auto status = chief->GetStatus(kTimeout);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->state(), JobStatus::RUNNING);
  EXPECT_EQ(status->steps_done(), 10);

  AddStepsRequest add;
  add.set_job_id("job-7");
  add.set_steps(30);
  auto added = chief->AddSteps(add, kTimeout);
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->total_steps(), 150);
  EXPECT_EQ(server.last_call(), "AddSteps job-7 30");

  CancelJobRequest cancel;
  cancel.set_job_id("job-7");
  EXPECT_TRUE(chief->CancelJob(cancel, kTimeout).ok());
  EXPECT_EQ(server.last_call(), "CancelJob job-7");

  auto checkpoint = chief->Checkpoint(CheckpointRequest(), kTimeout);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  EXPECT_EQ(checkpoint->id(), 3);
  EXPECT_EQ(checkpoint->steps_done(), 40);

  ReportEvalRequest eval;
  eval.set_job_id("job-7");
  eval.mutable_result()->set_accuracy(0.5);
  eval.set_final(true);
  EXPECT_TRUE(chief->ReportEval(eval, kTimeout).ok());
  EXPECT_EQ(server.last_call(), "ReportEval job-7 0.5 final");
}

TEST(GrpcChiefInterfaceTest, TheChiefsErrorsKeepTheirCodes) {
  ScriptedChief server;
  std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(server.address());
  SubmitJobRequest bad;
  bad.set_job_json("bad");
  auto submitted = chief->SubmitJob(bad, kTimeout);
  EXPECT_EQ(submitted.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(submitted.status().message(), HasSubstr("\"mode\": bad"));
  ReportEvalRequest stale;
  stale.set_job_id("old-1");
  const absl::Status reported = chief->ReportEval(stale, kTimeout);
  EXPECT_EQ(reported.code(), absl::StatusCode::kNotFound) << reported;
}

TEST(GrpcChiefInterfaceTest, UnreachableIsUnavailableAndSilentIsDeadlineExceeded) {
  std::string address;
  {
    ScriptedChief gone;  // its port is free once it has shut down
    address = gone.address();
  }
  std::unique_ptr<ChiefInterface> nowhere = NewGrpcChiefInterface(address);
  EXPECT_EQ(nowhere->GetStatus(kTimeout).status().code(), absl::StatusCode::kUnavailable);

  ScriptedChief server;
  server.Hold();
  std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(server.address());
  const absl::Time start = absl::Now();
  auto checkpoint = chief->Checkpoint(CheckpointRequest(), absl::Milliseconds(300));
  EXPECT_EQ(checkpoint.status().code(), absl::StatusCode::kDeadlineExceeded)
      << checkpoint.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

TEST(GrpcChiefInterfaceTest, WaitForPollsTheChief) {
  ScriptedChief server;
  std::unique_ptr<ChiefInterface> chief = NewGrpcChiefInterface(server.address());
  ChiefInterface::WaitOptions options;
  options.poll_interval = absl::Milliseconds(1);
  auto status = chief->WaitFor([](const JobStatus& s) { return s.steps_done() >= 30; },
                               absl::Now() + absl::Seconds(30), options);
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), 30);
}

}  // namespace
}  // namespace shardps
