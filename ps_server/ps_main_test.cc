// The ps daemon's command line: bad memory and reply flags exit 2 naming the flag, before
// the daemon serves anything.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
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
  };
  for (const auto& [flag, name] : cases) {
    std::string output;
    auto rc = testing::RunCommand(ps, {flag}, {{"TF_CONFIG", tf_config}}, &output);
    ASSERT_TRUE(rc.ok()) << rc.status();
    EXPECT_EQ(*rc, 2) << flag << ": " << output;
    EXPECT_TRUE(absl::StrContains(output, name)) << flag << ": " << output;
  }
}

}  // namespace
}  // namespace shardps
