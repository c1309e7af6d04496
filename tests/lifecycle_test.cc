// The daemons' lifecycle as a supervisor sees it: the exit code of each way a daemon stops
// (README "Exit codes"), the orphan timeout, and the request-size cap on a real daemon.
#include <signal.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "tests/process.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

// A worker daemon alone (its ps and chief addresses lead nowhere), started with `flags`.
class WorkerLifecycleTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags) {
    address_ = absl::StrCat("127.0.0.1:", PickFreePort());
    std::map<std::string, std::vector<std::string>> cluster = {
        {"chief", {absl::StrCat("127.0.0.1:", PickFreePort())}},
        {"ps", {absl::StrCat("127.0.0.1:", PickFreePort())}},
        {"worker", {address_}}};
    flags.push_back("--bind_host=127.0.0.1");
    flags.push_back("--threads=1");
    flags.push_back("--backend=cpu");
    auto process = Process::Start(BinaryPath("worker/worker"), flags,
                                  {{"TF_CONFIG", MakeTfConfig(cluster, "worker", 0)}},
                                  absl::StrCat(TempDir(), "/", TestName(), ".log"));
    ASSERT_TRUE(process.ok()) << process.status();
    worker_ = *std::move(process);
    stub_ = WorkerService::NewStub(NewChannel(address_));
  }

  static std::string TestName() {
    return ::testing::UnitTest::GetInstance()->current_test_info()->name();
  }

  // Polls Status until the worker answers (each answer is also contact from "the chief").
  // A fresh channel each time: one whose first connection was refused backs off for seconds.
  void WaitUntilServing() {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline && worker_->Running()) {
      stub_ = WorkerService::NewStub(NewChannel(address_));
      grpc::ClientContext ctx;
      ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(250)));
      WorkerStatusResponse status;
      if (stub_->Status(&ctx, WorkerStatusRequest(), &status).ok()) return;
      absl::SleepFor(absl::Milliseconds(50));
    }
    FAIL() << "worker not serving\n" << worker_->Log();
  }

  grpc::Status StartJob(const StartJobRequest& request) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
    StartJobResponse response;
    return stub_->StartJob(&ctx, request, &response);
  }

  std::string address_;
  std::unique_ptr<Process> worker_;
  std::unique_ptr<WorkerService::Stub> stub_;
};

TEST_F(WorkerLifecycleTest, NoChiefForTheOrphanTimeoutExitsSix) {
  Start({"--orphan_timeout_s=2"});
  auto code = worker_->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 6) << worker_->Log();
  EXPECT_THAT(worker_->Log(), HasSubstr("no contact from the chief since start"));
  EXPECT_THAT(worker_->Log(), HasSubstr("--orphan_timeout_s=2"));
}

TEST_F(WorkerLifecycleTest, ContactThenSilenceExitsSixCountingFromTheContact) {
  Start({"--orphan_timeout_s=2"});
  WaitUntilServing();
  auto code = worker_->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 6) << worker_->Log();
  EXPECT_THAT(worker_->Log(), HasSubstr("no contact from the chief for "));
}

TEST_F(WorkerLifecycleTest, SigtermExitsFiveForARestart) {
  Start({});
  WaitUntilServing();
  worker_->Signal(SIGTERM);
  auto code = worker_->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 5) << worker_->Log();
}

TEST_F(WorkerLifecycleTest, ShutdownRpcAtJobEndExitsZero) {
  Start({});
  WaitUntilServing();
  grpc::ClientContext ctx;
  WorkerShutdownRequest request;
  request.set_reason("job done");
  WorkerShutdownResponse response;
  ASSERT_TRUE(stub_->Shutdown(&ctx, request, &response).ok());
  auto code = worker_->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << worker_->Log();
}

TEST_F(WorkerLifecycleTest, BadCommonFlagExitsTwo) {
  Start({"--orphan_timeout_s=-3"});
  auto code = worker_->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2) << worker_->Log();
  EXPECT_THAT(worker_->Log(), HasSubstr("--orphan_timeout_s"));
}

TEST_F(WorkerLifecycleTest, RequestOverTheCapIsRefusedBeforeTheWorkerSeesIt) {
  Start({"--max_request_bytes=65536"});
  WaitUntilServing();
  StartJobRequest big;
  big.mutable_job()->set_job_id("job-1");
  big.mutable_job()->set_name(std::string(100000, 'x'));
  grpc::Status status = StartJob(big);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("65536"));
  // Under the cap, the request reaches the worker, which judges it on its merits.
  StartJobRequest small;
  small.mutable_job()->set_name(std::string(10000, 'x'));
  status = StartJob(small);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << status.error_message();
  EXPECT_THAT(status.error_message(), HasSubstr("job_id is empty"));
  EXPECT_TRUE(worker_->Running());
}

}  // namespace
}  // namespace testing
}  // namespace shardps
