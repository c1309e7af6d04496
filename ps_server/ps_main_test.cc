// The ps daemon's command line: bad memory and reply flags exit 2 naming the flag, before
// the daemon serves anything; the test aid --test_snapshot_write_delay_ms holds a snapshot's
// file back (and never a shutdown).
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "tests/process.h"

namespace shardps {
namespace {

TEST(PsMainTest, BadLimitFlagsExitTwoNamingTheFlag) {
  const std::string ps = testing::BinaryPath("ps_server/ps");
  // Never bound: every case fails on its flags first.
  const std::string tf_config = testing::MakeTfConfig({{"ps", {"127.0.0.1:1"}}}, "ps", 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--memory_budget_bytes=-2", "--memory_budget_bytes"},
      {"--memory_budget_bytes=lots", "--memory_budget_bytes"},
      {"--snapshot_reserve=1", "--snapshot_reserve"},
      {"--snapshot_reserve=-0.5", "--snapshot_reserve"},
      {"--max_reply_bytes=-1", "--max_reply_bytes"},
      {"--test_snapshot_write_delay_ms=-1", "--test_snapshot_write_delay_ms"},
  };
  for (const auto& [flag, name] : cases) {
    std::string output;
    auto rc = testing::RunCommand(ps, {flag}, {{"TF_CONFIG", tf_config}}, &output);
    ASSERT_TRUE(rc.ok()) << rc.status();
    EXPECT_EQ(*rc, 2) << flag << ": " << output;
    EXPECT_TRUE(absl::StrContains(output, name)) << flag << ": " << output;
  }
}

// A ps started with `flags`, serving one variable of 100 x 10 floats.
struct PsWithVariable {
  std::unique_ptr<testing::Process> process;
  std::unique_ptr<PsClient> client;
};

PsWithVariable StartPsWithVariable(const std::string& name, std::vector<std::string> flags) {
  PsWithVariable ps;
  const std::string address = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  flags.push_back("--bind_host=127.0.0.1");
  auto process = testing::Process::Start(
      testing::BinaryPath("ps_server/ps"), flags,
      {{"TF_CONFIG", testing::MakeTfConfig({{"ps", {address}}}, "ps", 0)}},
      absl::StrCat(testing::TempDir(), "/", name, ".log"));
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return ps;
  ps.process = *std::move(process);
  ps.client = *NewGrpcPsClient({address}, {});
  VariableDef def;
  def.name = "v";
  def.shape = {100, 10};
  def.initializer.set_type(InitializerSpec::ZEROS);
  def.optimizer.set_type(OptimizerSpec::SGD);
  def.optimizer.set_learning_rate(0.1);
  auto partitioner = *NewFixedShardsPartitioner(1);
  auto placer = *NewRoundRobinPlacer(1);
  // The client retries while the ps starts.
  absl::Status created = ps.client->CreateVariables({def}, *partitioner, placer.get());
  EXPECT_TRUE(created.ok()) << created << "\n" << ps.process->Log();
  if (!created.ok()) ps.client.reset();
  return ps;
}

TEST(PsMainTest, SnapshotWriteDelayHoldsTheFileBackButNotAShutdown) {
  PsWithVariable ps = StartPsWithVariable("delay_long", {"--test_snapshot_write_delay_ms=600000"});
  ASSERT_NE(ps.client, nullptr);
  const std::string file = absl::StrCat(testing::TempDir(), "/delayed.safetensors");
  std::vector<SnapshotResponse> snapped;
  ASSERT_TRUE(ps.client->SnapshotAll(1, {file}, 0, &snapped).ok());
  std::vector<SnapshotStatusResponse> status;
  ASSERT_TRUE(ps.client->SnapshotStatusAll(1, &status).ok());
  EXPECT_EQ(status[0].state(), SnapshotStatusResponse::WRITING);
  EXPECT_NE(access(file.c_str(), F_OK), 0) << "the file was written despite the delay";
  // The delay ends when the daemon stops: SIGTERM exits 5 well within the delay's 10 minutes.
  ps.process->Signal(SIGTERM);
  auto code = ps.process->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status() << "\n" << ps.process->Log();
  EXPECT_EQ(*code, 5) << ps.process->Log();
  EXPECT_TRUE(absl::StrContains(ps.process->Log(), "checkpoint 1's file waits 600000 ms"))
      << ps.process->Log();
}

// SIGTERM's exit code says whether a supervisor must bring the ps back: a --long_lived ps
// that holds no shards exits 0 (nothing needs it); one holding a job's shards exits 5.
TEST(PsMainTest, SigtermExitsZeroOnlyForAnIdleLongLivedPs) {
  const std::string address = absl::StrCat("127.0.0.1:", testing::PickFreePort());
  auto idle = testing::Process::Start(
      testing::BinaryPath("ps_server/ps"), {"--bind_host=127.0.0.1", "--long_lived"},
      {{"TF_CONFIG", testing::MakeTfConfig({{"ps", {address}}}, "ps", 0)}},
      absl::StrCat(testing::TempDir(), "/idle.log"));
  ASSERT_TRUE(idle.ok()) << idle.status();
  auto client = NewGrpcPsClient({address}, {});
  ASSERT_TRUE(client.ok()) << client.status();
  std::vector<HealthResponse> health;
  absl::Status up;
  for (int i = 0; i < 200 && !(up = (*client)->Health(&health)).ok(); ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(up.ok()) << up << (*idle)->Log();
  (*idle)->Signal(SIGTERM);
  auto code = (*idle)->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << (*idle)->Log();

  PsWithVariable busy = StartPsWithVariable("busy", {"--long_lived"});
  ASSERT_NE(busy.client, nullptr);
  busy.process->Signal(SIGTERM);
  code = busy.process->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 5) << busy.process->Log();
  EXPECT_TRUE(absl::StrContains(busy.process->Log(), "stopped (signal), exit code 5"))
      << busy.process->Log();
}

TEST(PsMainTest, ASnapshotWrittenAfterTheDelayIsDone) {
  PsWithVariable ps = StartPsWithVariable("delay_short", {"--test_snapshot_write_delay_ms=100"});
  ASSERT_NE(ps.client, nullptr);
  const std::string file = absl::StrCat(testing::TempDir(), "/after_delay.safetensors");
  std::vector<SnapshotResponse> snapped;
  ASSERT_TRUE(ps.client->SnapshotAll(1, {file}, 0, &snapped).ok());
  std::vector<SnapshotStatusResponse> status;
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  do {
    absl::SleepFor(absl::Milliseconds(20));
    ASSERT_TRUE(ps.client->SnapshotStatusAll(1, &status).ok());
  } while (status[0].state() == SnapshotStatusResponse::WRITING && absl::Now() < deadline);
  EXPECT_EQ(status[0].state(), SnapshotStatusResponse::DONE) << status[0].ShortDebugString();
  EXPECT_EQ(access(file.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace shardps
