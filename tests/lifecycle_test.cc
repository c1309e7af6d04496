// The daemons' lifecycle as a supervisor sees it: the exit code of each way a daemon stops
// (docs/exit-codes.md), the orphan timeout, and the request-size cap on a real daemon.
#include <signal.h>
#include <stdlib.h>

#include <fstream>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "evaluator/test_util.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "proto/coordinator.pb.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"
#include "tests/process.h"
#include "tests/training_cluster.h"
#include "tests/wait.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

// A worker daemon alone (its ps and chief addresses lead nowhere), started with `flags`.
class WorkerLifecycleTest : public ::testing::Test {
 protected:
  void Start(std::vector<std::string> flags) {
    address_ = LoopbackAddress();
    std::map<std::string, std::vector<std::string>> cluster = {
        {"chief", {LoopbackAddress()}},
        {"ps", {LoopbackAddress()}},
        {"worker", {address_}}};
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
    bool answered = false;
    PollUntil(
        [&] {
          if (!worker_->Running()) return true;
          stub_ = WorkerService::NewStub(NewChannel(address_));
          grpc::ClientContext ctx;
          AttachProtocolVersion(&ctx);
          ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Milliseconds(250)));
          WorkerStatusResponse status;
          answered = stub_->Status(&ctx, WorkerStatusRequest(), &status).ok();
          return answered;
        },
        absl::Now() + absl::Seconds(60), absl::Milliseconds(50));
    if (!answered) FAIL() << "worker not serving\n" << worker_->Log();
  }

  grpc::Status StartJob(const StartJobRequest& request) {
    grpc::ClientContext ctx;
    AttachProtocolVersion(&ctx);
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

// A --long_lived worker that runs no job has nothing to come back for: SIGTERM exits 0.
TEST_F(WorkerLifecycleTest, SigtermToAnIdleLongLivedWorkerExitsZero) {
  Start({"--long_lived"});
  WaitUntilServing();
  worker_->Signal(SIGTERM);
  auto code = worker_->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << worker_->Log();
}

TEST_F(WorkerLifecycleTest, ShutdownRpcAtJobEndExitsZero) {
  Start({});
  WaitUntilServing();
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
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

std::string TestName() { return ::testing::UnitTest::GetInstance()->current_test_info()->name(); }

absl::StatusOr<std::unique_ptr<Process>> StartEvaluator(
    const std::vector<std::string>& flags, const std::map<std::string, std::string>& env = {}) {
  return Process::Start(BinaryPath("evaluator/evaluator"), flags, env,
                        absl::StrCat(TempDir(), "/", TestName(), ".log"));
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

TEST(EvaluatorLifecycleTest, NeitherAChiefNorACheckpointDirExitsTwo) {
  unsetenv("TF_CONFIG");
  auto evaluator = StartEvaluator({});
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto code = (*evaluator)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2) << (*evaluator)->Log();
  EXPECT_THAT((*evaluator)->Log(), HasSubstr("--checkpoint_dir"));
}

// The chief never comes: the evaluator keeps trying (a restarting chief resumes its job)
// until the orphan timeout, then exits 6.
TEST(EvaluatorLifecycleTest, NoChiefForTheOrphanTimeoutExitsSix) {
  std::map<std::string, std::vector<std::string>> cluster = {
      {"chief", {LoopbackAddress()}},
      {"ps", {LoopbackAddress()}},
      {"evaluator", {LoopbackAddress()}}};
  auto evaluator =
      StartEvaluator({"--orphan_timeout_s=2", absl::StrCat("--metrics_file=", TempDir(), "/m")},
                     {{"TF_CONFIG", MakeTfConfig(cluster, "evaluator", 0)}});
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto code = (*evaluator)->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 6) << (*evaluator)->Log();
  const std::string log = (*evaluator)->Log();
  EXPECT_THAT(log, HasSubstr("chief unreachable"));
  EXPECT_THAT(log, HasSubstr("--orphan_timeout_s=2"));
}

// Sidecar mode, no TF_CONFIG: evaluates each committed checkpoint once, the final one last,
// and exits 0.
TEST(EvaluatorLifecycleTest, SidecarEvaluatesEachCheckpointAndExitsZeroAfterTheFinal) {
  unsetenv("TF_CONFIG");
  const std::string dir = absl::StrCat(TempDir(), "/", TestName(), "_ckpt");
  const JobSpec job = SoftmaxJob("job-7", dir);
  ASSERT_TRUE(WriteSoftmaxCheckpoint(dir, job, 1, TrainSoftmax(10), 10, false).ok());
  ASSERT_TRUE(WriteSoftmaxCheckpoint(dir, job, 2, TrainSoftmax(30), 30, true).ok());
  const std::string metrics = absl::StrCat(TempDir(), "/", TestName(), ".jsonl");
  auto evaluator = StartEvaluator(
      {absl::StrCat("--checkpoint_dir=", dir), absl::StrCat("--metrics_file=", metrics)});
  ASSERT_TRUE(evaluator.ok()) << evaluator.status();
  auto code = (*evaluator)->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*evaluator)->Log();
  std::vector<std::string> lines = Lines(metrics);
  ASSERT_EQ(lines.size(), 2u) << (*evaluator)->Log();
  EXPECT_THAT(lines[0], HasSubstr("\"checkpoint_id\": 1,"));
  EXPECT_THAT(lines[0], HasSubstr("\"step\": 10,"));
  EXPECT_THAT(lines[0], HasSubstr("\"final\": false"));
  EXPECT_THAT(lines[1], HasSubstr("\"checkpoint_id\": 2,"));
  EXPECT_THAT(lines[1], HasSubstr("\"step\": 30,"));
  EXPECT_THAT(lines[1], HasSubstr("\"final\": true"));
  EXPECT_THAT(lines[1], HasSubstr("\"job_id\": \"job-7\""));
}

// A cancelled job: the evaluator that followed it exits 4, without a final evaluation.
TEST(EvaluatorLifecycleTest, CancelledJobExitsFour) {
  const std::string job = WriteTempFile(
      "long.json", R"({"name": "long", "model": "softmax", "batch_size": 32, "steps": 1000000,
                       "optimizer": "sgd", "backend": "cpu"})");
  TrainingCluster::Options options;
  options.num_ps = 1;
  options.num_workers = 1;
  options.evaluator = true;
  options.job_file = job;
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  // Cancelled once the evaluator has evaluated it (its first line is in the metrics file).
  PollUntil([&] { return !Lines((*cluster)->metrics_file()).empty(); },
            absl::Now() + absl::Seconds(120), absl::Milliseconds(100));
  ASSERT_FALSE(Lines((*cluster)->metrics_file()).empty()) << (*cluster)->Logs();
  ASSERT_TRUE((*cluster)->chief_client().CancelJob(CancelJobRequest(), absl::Seconds(30)).ok());
  auto code = (*cluster)->evaluator()->Wait(absl::Seconds(120));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 4) << (*cluster)->Logs();
  for (const std::string& line : Lines((*cluster)->metrics_file())) {
    EXPECT_THAT(line, HasSubstr("\"final\": false"));
  }
  EXPECT_THAT((*cluster)->evaluator()->Log(), HasSubstr("CANCELLED"));
}

// Kubeflow's TFJob starts the evaluator outside TF_CONFIG's cluster, so the chief cannot see it
// there; --evaluator=yes makes the job wait for its final evaluation all the same.
TEST(EvaluatorLifecycleTest, OutsideTheClusterTheChiefWaitsForTheFinalEvaluationWhenTold) {
  const std::string job = WriteTempFile(
      "short.json", R"({"name": "short", "model": "softmax", "batch_size": 32, "steps": 200,
                        "optimizer": "sgd", "backend": "cpu"})");
  TrainingCluster::Options options;
  options.num_ps = 1;
  options.num_workers = 1;
  options.evaluator = true;
  options.evaluator_outside_cluster = true;
  options.long_lived = true;  // the chief stays to be asked about the ended job
  options.chief_flags = {"--evaluator=yes"};
  options.job_file = job;
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  // The job ends with the final evaluation (of all 200 steps) in. That the chief waits for it
  // only when told is chief_test's (WithAnEvaluatorTheJobSucceedsOnlyAfterTheFinalEvaluation):
  // here the evaluator is often quick enough either way.
  auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Seconds(120));
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_TRUE(status->has_eval()) << (*cluster)->Logs();
  EXPECT_EQ(status->last_eval().steps_done(), 200) << status->ShortDebugString();
  EXPECT_THAT((*cluster)->evaluator()->Log(), HasSubstr("not in cluster"));
}

TEST(ChiefLifecycleTest, ABadEvaluatorFlagExitsTwoNamingIt) {
  std::map<std::string, std::vector<std::string>> cluster = {{"chief", {LoopbackAddress()}},
                                                             {"ps", {LoopbackAddress()}}};
  std::string output;
  auto code = RunCommand(BinaryPath("coordinator/chief"), {"--evaluator=maybe"},
                         {{"TF_CONFIG", MakeTfConfig(cluster, "chief", 0)}}, &output);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 2) << output;
  EXPECT_THAT(output, HasSubstr("--evaluator must be auto, yes or no"));
}

}  // namespace
}  // namespace testing
}  // namespace shardps
