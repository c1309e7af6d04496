#include "rpc/daemon_run.h"

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/worker.grpc.pb.h"
#include "rpc/grpc_util.h"
#include "rpc/protocol.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kWorkerConfig[] =
    R"(--tf_config={"cluster": {"chief": ["localhost:2000"], "ps": ["localhost:2001"],
                                "worker": ["localhost:2002"]},
                    "task": {"type": "worker", "index": 0}})";

// A worker Daemon, initialized, with no orphan watch.
class DaemonRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::vector<std::string> args = {"daemon_run_test", kWorkerConfig, "--orphan_timeout_s=0"};
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    ASSERT_EQ(daemon_.Init(static_cast<int>(argv.size()), argv.data()), -1);
  }

  FlagParser flags_{"worker", "test"};
  Daemon daemon_{"worker", &flags_};
};

// Records what RunDaemon calls, and what the server answered meanwhile.
class RecordingBody : public DaemonBody {
 public:
  explicit RecordingBody(int exit_code) : exit_code_(exit_code) {}

  std::vector<grpc::Service*> Services() override {
    calls.push_back("Services");
    return {&service_};
  }
  std::string Describe() const override { return ", test body"; }
  int Run(Daemon& daemon) override {
    calls.push_back("Run");
    port = daemon.bound_port();
    serving_during_run = Health(port).ok();
    return exit_code_;
  }
  void BeginShutdown() override {
    calls.push_back("BeginShutdown");
    serving_at_begin = Health(port).ok();
  }
  void FinishShutdown() override {
    calls.push_back("FinishShutdown");
    serving_at_finish = Health(port).ok();
  }

  // A call to the server's WorkerService.Status (not implemented: UNIMPLEMENTED once served).
  static grpc::Status Health(int port) {
    auto stub = WorkerService::NewStub(NewChannel(absl::StrCat("127.0.0.1:", port)));
    grpc::ClientContext ctx;
    AttachProtocolVersion(&ctx);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    WorkerStatusResponse response;
    grpc::Status status = stub->Status(&ctx, WorkerStatusRequest(), &response);
    return status.error_code() == grpc::StatusCode::UNIMPLEMENTED ? grpc::Status::OK : status;
  }

  std::vector<std::string> calls;
  int port = 0;
  bool serving_during_run = false;
  bool serving_at_begin = false;
  bool serving_at_finish = true;

 private:
  const int exit_code_;
  WorkerService::CallbackService service_;
};

TEST_F(DaemonRunTest, ServesRunsThenShutsDownInOrderWithRunsExitCode) {
  RecordingBody body(kExitJobFailed);
  RunOptions options;
  options.listen = RunOptions::Listen::kAddress;
  options.address = "127.0.0.1:0";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunDaemon(daemon_, body, options), kExitJobFailed);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(body.calls, ElementsAre("Services", "Run", "BeginShutdown", "FinishShutdown"));
  EXPECT_GT(body.port, 0);
  EXPECT_TRUE(body.serving_during_run);
  EXPECT_TRUE(body.serving_at_begin);    // the server still takes calls
  EXPECT_FALSE(body.serving_at_finish);  // it has stopped
  EXPECT_THAT(log, HasSubstr(absl::StrCat("worker: worker:0 at localhost:2002 serving on "
                                          "127.0.0.1:",
                                          body.port, ", test body\n")));
  EXPECT_THAT(log, HasSubstr("worker: stopped (job ended), exit code 4\n"));
}

TEST_F(DaemonRunTest, TheDefaultRunWaitsForTheStopAndExitsWithItsCode) {
  DaemonBody body;
  RunOptions options;
  options.listen = RunOptions::Listen::kNone;
  std::thread stopper([this] {
    absl::SleepFor(absl::Milliseconds(50));
    daemon_.RequestStop("job done", /*from_rpc=*/true);
  });
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunDaemon(daemon_, body, options), kExitDone);
  const std::string log = ::testing::internal::GetCapturedStderr();
  stopper.join();
  EXPECT_EQ(daemon_.stop_cause(), StopCause::kRequest);
  EXPECT_THAT(log, HasSubstr("worker: worker:0 at localhost:2002\n"));  // no server
  EXPECT_THAT(log, HasSubstr("worker: stopped (request), exit code 0\n"));
}

TEST_F(DaemonRunTest, AnAddressItCannotListenOnExitsOneWithoutRunning) {
  // Held by a server of this test.
  grpc::ServerBuilder builder;
  Daemon::ConfigureBuilder(&builder, 0);  // no SO_REUSEPORT
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  WorkerService::CallbackService service;
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> holder = builder.BuildAndStart();
  ASSERT_GT(port, 0);
  RecordingBody body(kExitDone);
  RunOptions options;
  options.listen = RunOptions::Listen::kAddress;
  options.address = absl::StrCat("127.0.0.1:", port);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunDaemon(daemon_, body, options), kExitError);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(body.calls, ElementsAre("Services"));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("worker: error: cannot listen on 127.0.0.1:", port)));
  holder->Shutdown();
}

// What the health port answers for the server as a whole: "SERVING", "NOT_SERVING", or the
// error's code name when the call fails ("UNAVAILABLE": nothing listens).
std::string HealthPortSays(const std::string& address) {
  auto stub = grpc::health::v1::Health::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &response);
  if (!status.ok()) return status.error_code() == grpc::StatusCode::UNAVAILABLE ? "UNAVAILABLE"
                                                                               : "ERROR";
  return grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
}

// Records what the health port answers at each step of RunDaemon.
class HealthRecordingBody : public DaemonBody {
 public:
  explicit HealthRecordingBody(std::string health) : health_(std::move(health)) {}
  std::vector<grpc::Service*> Services() override { return {&service_}; }
  int Run(Daemon&) override {
    said.push_back("Run: " + HealthPortSays(health_));
    return kExitDone;
  }
  void BeginShutdown() override { said.push_back("BeginShutdown: " + HealthPortSays(health_)); }
  void FinishShutdown() override {
    said.push_back("FinishShutdown: " + HealthPortSays(health_));
  }

  std::vector<std::string> said;

 private:
  const std::string health_;
  WorkerService::CallbackService service_;
};

TEST(DaemonRunHealthPortTest, SameStatusAsTheMainPortThroughTheShutdown) {
  // A loopback address of this test's own (127.64.0.0/10) and a port below the ephemeral
  // range: the main server binds port 0 there, the health port this one.
  std::random_device random;
  const std::string host = absl::StrCat("127.", 64 + random() % 64, ".", random() % 256, ".",
                                        1 + random() % 254);
  const int health_port = 20000 + static_cast<int>(random() % 10000);
  const std::string health = absl::StrCat(host, ":", health_port);
  std::vector<std::string> args = {"daemon_run_test", kWorkerConfig, "--orphan_timeout_s=0",
                                   absl::StrCat("--health_port=", health_port)};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  FlagParser flags("worker", "test");
  Daemon daemon("worker", &flags);
  ASSERT_EQ(daemon.Init(static_cast<int>(argv.size()), argv.data()), -1);
  EXPECT_EQ(daemon.health_port(), health_port);

  HealthRecordingBody body(health);
  RunOptions options;
  options.listen = RunOptions::Listen::kAddress;
  options.address = host + ":0";
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(RunDaemon(daemon, body, options), kExitDone);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr(absl::StrCat("worker: health checks on ", health,
                                          " (plaintext, grpc.health.v1 only)\n")));
  // SERVING while the daemon serves, NOT_SERVING once its server drains, then closed.
  EXPECT_THAT(body.said, ElementsAre("Run: SERVING", "BeginShutdown: SERVING",
                                     "FinishShutdown: NOT_SERVING"))
      << log;
  EXPECT_EQ(HealthPortSays(health), "UNAVAILABLE");
}

// A shutdown stuck past its grace ends the process with the exit code all the same.
class StuckBody : public DaemonBody {
 public:
  int Run(Daemon&) override { return kExitInterrupted; }
  void FinishShutdown() override { absl::Notification().WaitForNotification(); }
};

TEST_F(DaemonRunTest, AShutdownStuckPastTheGraceExitsWithTheCode) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  StuckBody body;
  RunOptions options;
  options.listen = RunOptions::Listen::kNone;
  options.shutdown_grace = absl::Milliseconds(100);
  EXPECT_EXIT(RunDaemon(daemon_, body, options), ::testing::ExitedWithCode(kExitInterrupted),
              "still shutting down after 100ms");
}

}  // namespace
}  // namespace shardps
