// Rolling upgrades with real daemons: every RPC carries the wire protocol version, and a
// daemon that meets one of an incompatible release fails with an error naming both versions,
// changing nothing; releases whose versions overlap work together. Daemons of "another
// release" are this build with --test_protocol_version.
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/protocol_version.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/process.h"
#include "tests/training_cluster.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::HasSubstr;


const std::string kNow = std::to_string(kProtocolVersion);
const std::string kNext = std::to_string(kProtocolVersion + 1);

std::string ShortJob(int steps) {
  return WriteTempFile(absl::StrCat("job_", steps, ".json"),
                       absl::StrCat(R"({"name": "proto", "model": "softmax", "batch_size": 32,
                                        "steps": )",
                                    steps, R"(, "mode": "async", "optimizer": "sgd",
                                        "backend": "cpu"})"));
}

// A ps of the next release that still speaks this one ("N-N+1") trains with the others; a
// worker of the next release only ("N+1") is refused by the chief and the ps: it shows as
// failed, naming both versions, and the job finishes on the other worker, every step once.
TEST(ProtocolVersionTest, OverlappingReleasesTrainTogetherAnIncompatibleWorkerIsLeftOut) {
  TrainingCluster::Options options;
  options.num_ps = 2;
  options.num_workers = 2;
  options.long_lived = true;  // the chief stays to be asked about the ended job
  options.job_file = ShortJob(200);
  options.task_flags[{"ps", 1}] = {absl::StrCat("--test_protocol_version=", kNow, "-", kNext)};
  options.task_flags[{"worker", 1}] = {absl::StrCat("--test_protocol_version=", kNext)};
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto status = (*cluster)->WaitForState(JobStatus::SUCCEEDED, absl::Seconds(180));
  ASSERT_TRUE(status.ok()) << status.status() << (*cluster)->Logs();
  EXPECT_EQ(status->steps_done(), 200);
  ASSERT_EQ(status->workers_size(), 2);
  EXPECT_EQ(status->workers(0).steps_done(), 200);
  EXPECT_EQ(status->workers(1).steps_done(), 0);
  EXPECT_EQ(status->workers(1).state(), "failed") << status->workers(1).DebugString();
  EXPECT_THAT(status->workers(1).error(), HasSubstr("incompatible shardps protocol"));
  EXPECT_THAT(status->workers(1).error(), HasSubstr("speaks protocol " + kNow));
  EXPECT_THAT(status->workers(1).error(), HasSubstr("this worker speaks protocol " + kNext));
}

// A ps of an incompatible release: the chief given a job says so at once and exits 1 (a
// supervisor retries: the rolling upgrade may replace either side), creating nothing.
TEST(ProtocolVersionTest, AChiefThatMeetsAnIncompatiblePsExitsNamingBothVersions) {
  TrainingCluster::Options options;
  options.num_ps = 1;
  options.num_workers = 1;
  options.job_file = ShortJob(20);
  options.task_flags[{"ps", 0}] = {absl::StrCat("--test_protocol_version=", kNext)};
  // The chief may end before the harness sees it serve (Start then fails, with the logs).
  auto cluster = TrainingCluster::Start(options);
  std::string logs;
  if (cluster.ok()) {
    auto code = (*cluster)->chief()->Wait(absl::Seconds(60));
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 1) << (*cluster)->chief()->Log();
    logs = (*cluster)->chief()->Log();
  } else {
    logs = std::string(cluster.status().message());
    EXPECT_THAT(logs, HasSubstr("--- chief (exited 1) ---"));
  }
  EXPECT_THAT(logs, HasSubstr("error: ps:0 ("));
  EXPECT_THAT(logs, HasSubstr("incompatible shardps protocol"));
  // "... speaks protocol 2 (compatible back to 1), this ps speaks protocol 3"
  EXPECT_THAT(logs, HasSubstr("speaks protocol " + kNow));
  EXPECT_THAT(logs, HasSubstr(", this ps speaks protocol " + kNext));
}

// shardctl of another release against this chief: an error naming both, exit 1; the chief
// has no job afterwards (the refused submit changed nothing).
TEST(ProtocolVersionTest, ShardctlOfAnotherReleaseIsRefusedAndChangesNothing) {
  TrainingCluster::Options options;
  options.num_ps = 1;
  options.num_workers = 1;
  options.long_lived = true;
  auto cluster = TrainingCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  const std::string shardctl = BinaryPath("coordinator/cli/shardctl");
  const std::string chief = absl::StrCat("--chief=", (*cluster)->chief_address());
  std::string out;
  auto code = RunCommand(shardctl,
                         {"submit", ShortJob(20), chief, "--timeout=30",
                          absl::StrCat("--test_protocol_version=", kNext)},
                         {}, &out);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 1) << out;
  EXPECT_THAT(out, HasSubstr("incompatible shardps protocol"));
  EXPECT_THAT(out, HasSubstr("speaks protocol " + kNext));
  EXPECT_THAT(out, HasSubstr("this chief speaks protocol " + kNow));
  code = RunCommand(shardctl, {"status", chief, "--timeout=30"}, {}, &out);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << out;
  EXPECT_THAT(out, HasSubstr("NO_JOB"));
  // --version on a daemon names the build's protocol.
  code = RunCommand(BinaryPath("ps_server/ps"), {"--version"}, {}, &out);
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << out;
  EXPECT_THAT(out, HasSubstr("protocol " + kNow));
}

}  // namespace
}  // namespace testing
}  // namespace shardps
