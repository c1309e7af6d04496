// The Cluster fixture against a scripted launcher and a scripted chief on 127.0.0.1:0:
// connecting waits for the port and the first answer, takes a chief that ended well as up,
// and names the logs on failure; the job waits return the status asked for, or fail at once
// when the job ended otherwise or the chief can no longer answer.
#include "tests/cluster.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;

// Answers GetStatus from a script, repeating its last entry.
class ScriptedChief final : public CoordinatorService::Service {
 public:
  explicit ScriptedChief(std::vector<JobStatus> statuses) : statuses_(std::move(statuses)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
  }
  ~ScriptedChief() override { server_->Shutdown(); }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

  grpc::Status GetStatus(grpc::ServerContext*, const GetStatusRequest*,
                         JobStatus* response) override {
    absl::MutexLock lock(&mu_);
    *response = statuses_[std::min(next_++, statuses_.size() - 1)];
    return grpc::Status::OK;
  }

 private:
  absl::Mutex mu_;
  const std::vector<JobStatus> statuses_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

// A launcher whose chief is at `address`; `ended` says whether and how the chief ended.
class ScriptedLauncher final : public Launcher {
 public:
  ScriptedLauncher(std::string address, std::optional<absl::Status>* ended)
      : address_(std::move(address)), ended_(ended) {}
  std::string chief_address() const override { return address_; }
  std::optional<absl::Status> ChiefEnded() override { return *ended_; }
  pid_t Pid(const std::string& task) const override { return task == "chief-0" ? 42 : 0; }
  std::string Log(const std::string& task) const override { return "log of " + task; }
  std::string Logs() const override { return "--- every log ---"; }

 private:
  const std::string address_;
  std::optional<absl::Status>* const ended_;
};

class TestCluster : public Cluster {
 public:
  TestCluster(const std::string& address, std::optional<absl::Status>* ended)
      : Cluster(std::make_unique<ScriptedLauncher>(address, ended), Polling()) {}
  using Cluster::ConnectChief;
};

JobStatus Status(JobStatus::State state, int64_t steps_done) {
  JobStatus s;
  s.set_state(state);
  s.set_job_id("job-1");
  s.set_steps_done(steps_done);
  return s;
}

// An address nothing listens on.
std::string ClosedAddress() {
  ScriptedChief gone({JobStatus()});
  return gone.address();
}

TEST(ClusterTest, ConnectsOnceTheChiefAnswersAndReportsItsStatus) {
  ScriptedChief chief({Status(JobStatus::RUNNING, 5), Status(JobStatus::RUNNING, 9)});
  std::optional<absl::Status> ended;
  TestCluster cluster(chief.address(), &ended);
  EXPECT_EQ(cluster.chief_address(), chief.address());
  ASSERT_TRUE(cluster.ConnectChief(absl::Now() + absl::Seconds(30)).ok());
  auto status = cluster.Status();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->steps_done(), 9);
  EXPECT_EQ(cluster.Pid("chief-0"), 42);
  EXPECT_EQ(cluster.Log("ps-1"), "log of ps-1");
}

TEST(ClusterTest, AChiefThatEndedWellIsUpAndOneThatFailedIsAnError) {
  const std::string nowhere = ClosedAddress();
  std::optional<absl::Status> ended = absl::OkStatus();
  TestCluster done(nowhere, &ended);
  EXPECT_TRUE(done.ConnectChief(absl::Now() + absl::Seconds(30)).ok());

  std::optional<absl::Status> failed = absl::InternalError("the chief exited 1");
  TestCluster crashed(nowhere, &failed);
  const absl::Status s = crashed.ConnectChief(absl::Now() + absl::Seconds(30));
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_THAT(s.message(), HasSubstr("exited 1"));
  EXPECT_THAT(s.message(), HasSubstr("--- every log ---"));
}

TEST(ClusterTest, ConnectingGivesUpAtTheDeadlineWithTheLogs) {
  std::optional<absl::Status> ended;
  TestCluster cluster(ClosedAddress(), &ended);
  const absl::Status s = cluster.ConnectChief(absl::Now() + absl::Milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(s.message(), HasSubstr("--- every log ---"));
}

TEST(ClusterTest, WaitForStateReturnsTheStateOrFailsAtOnceOnAnotherEnd) {
  ScriptedChief succeeds({Status(JobStatus::NO_JOB, 0), Status(JobStatus::RUNNING, 5),
                          Status(JobStatus::SUCCEEDED, 10)});
  std::optional<absl::Status> ended;
  TestCluster ok(succeeds.address(), &ended);
  auto done = ok.WaitForState(JobStatus::SUCCEEDED, absl::Seconds(30));
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->steps_done(), 10);

  JobStatus failed = Status(JobStatus::FAILED, 3);
  failed.set_error("worker 0 failed");
  ScriptedChief fails({Status(JobStatus::RUNNING, 1), failed});
  TestCluster bad(fails.address(), &ended);
  const absl::Time start = absl::Now();
  auto s = bad.WaitForState(JobStatus::SUCCEEDED, absl::Minutes(5));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("ended as FAILED: worker 0 failed"));
  EXPECT_THAT(s.status().message(), HasSubstr("--- every log ---"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(30));
}

TEST(ClusterTest, WaitForStateFailsOnceTheChiefCanNoLongerAnswer) {
  std::optional<absl::Status> ended = absl::InternalError("run_netns.sh exited (1)");
  TestCluster cluster(ClosedAddress(), &ended);
  auto s = cluster.WaitForState(JobStatus::SUCCEEDED, absl::Minutes(5));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("run_netns.sh exited (1)"));
}

TEST(ClusterTest, WaitForStatusPollsUntilItHoldsOrTheTimeoutWithTheLogs) {
  ScriptedChief chief({Status(JobStatus::RUNNING, 1), Status(JobStatus::RUNNING, 2),
                       Status(JobStatus::RUNNING, 3)});
  std::optional<absl::Status> ended;
  TestCluster cluster(chief.address(), &ended);
  auto three = cluster.WaitForStatus([](const JobStatus& s) { return s.steps_done() == 3; },
                                     absl::Seconds(30));
  ASSERT_TRUE(three.ok()) << three.status();
  auto never = cluster.WaitForStatus([](const JobStatus& s) { return s.steps_done() > 3; },
                                     absl::Milliseconds(100));
  EXPECT_EQ(never.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(never.status().message(), HasSubstr("--- every log ---"));
}

}  // namespace
}  // namespace testing
}  // namespace shardps
