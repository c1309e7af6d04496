#include "rpc/protocol.h"
#include "worker/rpc/grpc_worker_service.h"

#include <memory>
#include <string>
#include <vector>

#include <atomic>
#include <optional>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "client/intercepting_ps_interface.h"
#include "client/local_ps_interface.h"
#include "common/error_detail.h"
#include "client/ps_client.h"
#include "grpcpp/client_context.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "proto/worker.grpc.pb.h"
#include "ps_server/shard_store.h"
#include "rpc/executor.h"
#include "rpc/grpc_util.h"
#include "worker/step_executor.h"

namespace shardps {
namespace {

// A worker service on 127.0.0.1:<any port>, whose step executor talks to one in-process ps
// (which answers UNAVAILABLE, as one that is down, while ps_down_ is set).
class GrpcWorkerServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = ShardStore::Create(ShardStore::Options());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);

    StepExecutor::Options options;
    options.task_index = 2;
    options.backend_override = BackendKind::kCpu;
    options.num_threads = 1;
    options.connect = [this](const std::vector<std::string>& addresses) {
      std::vector<std::unique_ptr<PsInterface>> ps;
      for (const std::string& address : addresses) {
        ps.push_back(std::make_unique<InterceptingPsInterface>(
            address, NewLocalPsInterface(address, store_.get()),
            [this](absl::string_view, const google::protobuf::Message&,
                   google::protobuf::Message*, absl::Time) -> std::optional<absl::Status> {
              if (ps_down_) return absl::UnavailableError("connection refused");
              return std::nullopt;
            }));
      }
      PsClient::Options client_options;
      client_options.initial_backoff = absl::Milliseconds(1);
      client_options.max_backoff = absl::Milliseconds(2);
      return PsClient::Create(std::move(ps), client_options);
    };
    auto step_executor = StepExecutor::Create(options);
    ASSERT_TRUE(step_executor.ok()) << step_executor.status();
    step_executor_ = *std::move(step_executor);

    executor_ = std::make_unique<Executor>(2);
    WorkerServiceOptions service_options;
    service_options.on_shutdown = [this](const std::string& reason) {
      shutdown_reason_ = reason;
      shutdown_.Notify();
    };
    service_options.on_chief_call = [this] { ++chief_calls_; };
    service_ = NewGrpcWorkerService(step_executor_.get(), executor_.get(), service_options);
    grpc::ServerBuilder builder;
    ConfigureServerBuilder(&builder);
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    stub_ = WorkerService::NewStub(NewChannel("127.0.0.1:" + std::to_string(port)));
  }

  void TearDown() override {
    if (server_ != nullptr) {
      server_->Shutdown();
      server_->Wait();
    }
    executor_.reset();
    if (store_ != nullptr) store_->Shutdown();
  }

  // The softmax model's variables for job name "fm", unsplit, on the one ps.
  void CreateVariables() {
    std::vector<VariableDef> defs(2);
    defs[0].name = "fm/dense_0/kernel";
    defs[0].shape = {784, 10};
    defs[0].initializer.set_type(InitializerSpec::GLOROT_UNIFORM);
    defs[1].name = "fm/dense_0/bias";
    defs[1].shape = {10};
    for (VariableDef& def : defs) {
      def.optimizer.set_type(OptimizerSpec::SGD);
      def.optimizer.set_learning_rate(0.1);
    }
    std::vector<std::unique_ptr<PsInterface>> ps;
    ps.push_back(NewLocalPsInterface("ps0", store_.get()));
    auto chief = PsClient::Create(std::move(ps), PsClient::Options());
    ASSERT_TRUE(chief.ok()) << chief.status();
    auto partitioner = ParsePartitioner("fixed:1");
    ASSERT_TRUE(partitioner.ok());
    auto placer = NewRoundRobinPlacer(1);
    ASSERT_TRUE(placer.ok());
    ASSERT_TRUE((*chief)->CreateVariables(defs, **partitioner, placer->get()).ok());
  }

  std::unique_ptr<ShardStore> store_;
  std::unique_ptr<StepExecutor> step_executor_;
  std::unique_ptr<Executor> executor_;
  std::unique_ptr<grpc::Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WorkerService::Stub> stub_;
  absl::Notification shutdown_;
  std::string shutdown_reason_;
  std::atomic<bool> ps_down_{false};
  std::atomic<int> chief_calls_{0};
};

TEST_F(GrpcWorkerServiceTest, StartJobRunStepAndStatus) {
  CreateVariables();
  StartJobRequest start;
  JobSpec* job = start.mutable_job();
  job->set_job_id("job-1");
  job->set_name("fm");
  job->set_model("softmax");
  job->set_batch_size(32);
  start.add_ps_addresses("ps0");
  StartJobResponse started;
  grpc::ClientContext start_ctx;
  AttachProtocolVersion(&start_ctx);
  grpc::Status s = stub_->StartJob(&start_ctx, start, &started);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_TRUE(absl::StartsWith(started.backend(), "cpu")) << started.backend();

  StepRequest step;
  step.set_job_id("job-1");
  step.set_step_id(0);
  step.set_batch_index(5);
  StepResponse result;
  grpc::ClientContext step_ctx;
  AttachProtocolVersion(&step_ctx);
  s = stub_->RunStep(&step_ctx, step, &result);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(result.examples(), 32);
  EXPECT_GT(result.loss(), 0);

  WorkerStatusResponse status;
  grpc::ClientContext status_ctx;
  AttachProtocolVersion(&status_ctx);
  s = stub_->Status(&status_ctx, WorkerStatusRequest(), &status);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(status.task_index(), 2);
  EXPECT_EQ(status.job_id(), "job-1");
  EXPECT_EQ(status.steps_run(), 1);
  EXPECT_EQ(status.backend(), started.backend());
}

TEST_F(GrpcWorkerServiceTest, UnknownJobKeepsCodeAndMessage) {
  StepRequest step;
  step.set_job_id("job-9");
  StepResponse result;
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  grpc::Status s = stub_->RunStep(&ctx, step, &result);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "unknown job")) << s.error_message();
  // What the chief decides by: the typed detail, across the wire.
  EXPECT_EQ(DetailKind(FromGrpcStatus(s)), ErrorDetail::UNKNOWN_JOB);
}

// A ps the worker cannot reach: the chief gets the worker's answer with the ps's detail, so it
// can tell a ps failure from the worker's own.
TEST_F(GrpcWorkerServiceTest, APsFailureReachesTheCallerWithItsDetail) {
  CreateVariables();
  StartJobRequest start;
  JobSpec* job = start.mutable_job();
  job->set_job_id("job-1");
  job->set_name("fm");
  job->set_model("softmax");
  job->set_batch_size(32);
  start.add_ps_addresses("ps:0 (ps-0.svc:2222)");
  StartJobResponse started;
  grpc::ClientContext start_ctx;
  AttachProtocolVersion(&start_ctx);
  ASSERT_TRUE(stub_->StartJob(&start_ctx, start, &started).ok());

  ps_down_ = true;
  StepRequest step;
  step.set_job_id("job-1");
  step.set_step_id(4);
  step.set_batch_index(4);
  StepResponse result;
  grpc::ClientContext step_ctx;
  AttachProtocolVersion(&step_ctx);
  absl::Status s = FromGrpcStatus(stub_->RunStep(&step_ctx, step, &result));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  std::optional<ErrorDetail> detail = GetDetail(s);
  ASSERT_TRUE(detail.has_value()) << s;
  EXPECT_EQ(detail->kind(), ErrorDetail::PS_UNAVAILABLE);
  EXPECT_EQ(detail->ps_task(), 0);
  EXPECT_TRUE(absl::StrContains(s.message(), "ps:0 (ps-0.svc:2222): connection refused")) << s;
}

TEST_F(GrpcWorkerServiceTest, StartJobErrorReachesTheCaller) {
  StartJobRequest start;
  start.mutable_job()->set_job_id("job-1");
  start.mutable_job()->set_name("fm");
  start.mutable_job()->set_model("softmax");
  start.mutable_job()->set_batch_size(32);
  start.mutable_job()->set_data_dir("/nonexistent/data");
  start.add_ps_addresses("ps0");
  StartJobResponse started;
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  grpc::Status s = stub_->StartJob(&ctx, start, &started);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_TRUE(absl::StrContains(s.error_message(), "/nonexistent/data")) << s.error_message();
}

TEST_F(GrpcWorkerServiceTest, ShutdownRepliesThenCallsOnShutdown) {
  WorkerShutdownRequest request;
  request.set_reason("job done");
  WorkerShutdownResponse response;
  grpc::ClientContext ctx;
  AttachProtocolVersion(&ctx);
  grpc::Status s = stub_->Shutdown(&ctx, request, &response);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_TRUE(shutdown_.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(shutdown_reason_, "job done");
}

// Every call is the chief's, so each one, whatever its outcome, resets the orphan clock.
TEST_F(GrpcWorkerServiceTest, EveryCallCountsAsContactFromTheChief) {
  EXPECT_EQ(chief_calls_.load(), 0);
  WorkerStatusResponse status;
  grpc::ClientContext status_ctx;
  AttachProtocolVersion(&status_ctx);
  ASSERT_TRUE(stub_->Status(&status_ctx, WorkerStatusRequest(), &status).ok());
  EXPECT_EQ(chief_calls_.load(), 1);

  StartJobRequest start;  // refused: no job id
  StartJobResponse started;
  grpc::ClientContext start_ctx;
  AttachProtocolVersion(&start_ctx);
  EXPECT_EQ(stub_->StartJob(&start_ctx, start, &started).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(chief_calls_.load(), 2);

  StepRequest step;  // refused: unknown job
  step.set_job_id("job-9");
  StepResponse result;
  grpc::ClientContext step_ctx;
  AttachProtocolVersion(&step_ctx);
  EXPECT_EQ(stub_->RunStep(&step_ctx, step, &result).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(chief_calls_.load(), 3);

  WorkerShutdownResponse shut;
  grpc::ClientContext shut_ctx;
  AttachProtocolVersion(&shut_ctx);
  ASSERT_TRUE(stub_->Shutdown(&shut_ctx, WorkerShutdownRequest(), &shut).ok());
  EXPECT_EQ(chief_calls_.load(), 4);
}

}  // namespace
}  // namespace shardps
