// deploy/systemd/shardps@.service, the unit for one daemon per node: systemd's own checker
// (systemd-analyze verify) accepts it for every role, its command line is one each daemon
// accepts (run with --validate_config on a TF_CONFIG file, as the unit gives it, and the
// environment of deploy/systemd/shardps.env, the example /etc/shardps/<role>.env: mutual TLS
// with certificates made by deploy/certs.sh, or SHARDPS_INSECURE=1), and its restart policy
// follows the exit-code table in rpc/daemon.h.
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/daemon.h"
#include "tests/process.h"

namespace shardps {
namespace testing {
namespace {

using ::testing::UnorderedElementsAre;

const char* const kRoles[] = {"chief", "ps", "worker", "evaluator"};
const std::map<std::string, std::string> kBinaries = {{"chief", "coordinator/chief"},
                                                      {"ps", "ps_server/ps"},
                                                      {"worker", "worker/worker"},
                                                      {"evaluator", "evaluator/evaluator"}};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string UnitText() { return ReadFile(BinaryPath("deploy/systemd/shardps@.service")); }

// The variables deploy/systemd/shardps.env sets (KEY=VALUE lines; comments skipped, quotes
// removed, as systemd's EnvironmentFile reads them).
std::map<std::string, std::string> EnvFile() {
  std::map<std::string, std::string> vars;
  for (absl::string_view line :
       absl::StrSplit(ReadFile(BinaryPath("deploy/systemd/shardps.env")), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits('=', 1));
    absl::string_view value = kv.second;
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    vars[kv.first] = std::string(value);
  }
  return vars;
}

// The value of `key=` in the unit (the last one; "" when absent).
std::string Value(const std::string& unit, const std::string& key) {
  std::string value;
  for (absl::string_view line : absl::StrSplit(unit, '\n')) {
    if (absl::ConsumePrefix(&line, key + "=")) value = std::string(line);
  }
  return value;
}

std::vector<int> Codes(const std::string& list) {
  std::vector<int> codes;
  for (absl::string_view word : absl::StrSplit(list, ' ', absl::SkipEmpty())) {
    int code = -1;
    EXPECT_TRUE(absl::SimpleAtoi(word, &code)) << word;
    codes.push_back(code);
  }
  return codes;
}

TEST(SystemdUnitTest, TheEnvironmentFileGivesMutualTlsOrSaysInsecure) {
  const std::map<std::string, std::string> env = EnvFile();
  EXPECT_EQ(env.count("SHARDPS_INSECURE"), 0u);
  EXPECT_EQ(env.at("SHARDPS_TLS_CERT_FILE"), "/etc/shardps/tls/node.crt");
  EXPECT_EQ(env.at("SHARDPS_TLS_KEY_FILE"), "/etc/shardps/tls/node.key");
  EXPECT_EQ(env.at("SHARDPS_TLS_CA_FILE"), "/etc/shardps/tls/ca.crt");
  EXPECT_EQ(env.at("SHARDPS_TLS_CLIENT_AUTH"), "true");
  EXPECT_EQ(env.at("SHARDPS_ARGS"), "");
  // The plaintext alternative, stated explicitly where a user edits.
  EXPECT_TRUE(absl::StrContains(ReadFile(BinaryPath("deploy/systemd/shardps.env")),
                                "\n#SHARDPS_INSECURE=1\n"));
  // The unit reads it, per role.
  EXPECT_EQ(Value(UnitText(), "EnvironmentFile"), "-/etc/shardps/%i.env");
}

TEST(SystemdUnitTest, RestartPolicyFollowsTheExitCodes) {
  const std::string unit = UnitText();
  ASSERT_FALSE(unit.empty());
  EXPECT_EQ(Value(unit, "Restart"), "on-failure");  // 1 restarts
  EXPECT_THAT(Codes(Value(unit, "RestartPreventExitStatus")),
              UnorderedElementsAre(kExitBadConfig, kExitOrphaned));
  // 5: a clean stop under `systemctl stop`, a restart otherwise.
  EXPECT_THAT(Codes(Value(unit, "SuccessExitStatus")), UnorderedElementsAre(kExitInterrupted));
  EXPECT_THAT(Codes(Value(unit, "RestartForceExitStatus")), UnorderedElementsAre(kExitInterrupted));
  // Room for the chief's SIGTERM checkpoint (--interrupt_timeout_s, 60 s by default).
  int stop_s = 0;
  ASSERT_TRUE(absl::SimpleAtoi(Value(unit, "TimeoutStopSec"), &stop_s));
  EXPECT_GT(stop_s, 60);
}

// The unit's ExecStart for `role`, with the binary and the TF_CONFIG file moved to where this
// test has them, and the given extra args for $SHARDPS_ARGS.
std::vector<std::string> ExecStart(const std::string& unit, const std::string& role,
                                   const std::string& tf_config_file) {
  std::string line = Value(unit, "ExecStart");
  line = absl::StrReplaceAll(line, {{"%i", role},
                                    {"/etc/shardps/tf_config.json", tf_config_file},
                                    {"$SHARDPS_ARGS", ""}});
  return absl::StrSplit(line, ' ', absl::SkipEmpty());
}

TEST(SystemdUnitTest, EachDaemonAcceptsTheUnitsCommandLine) {
  const std::string unit = UnitText();
  const std::string dir = FreshTempDir("cmdline");
  mkdir(dir.c_str(), 0755);
  // The environment file's certificates, made where this test has them.
  std::string out;
  ASSERT_EQ(RunCommand(BinaryPath("deploy/certs.sh"),
                       {dir + "/tls", "node=DNS:node-b.example,URI:spiffe://shardps/ps"}, {}, &out)
                .value_or(-1),
            0)
      << out;
  std::map<std::string, std::string> tls = EnvFile();
  for (auto& [key, value] : tls) {
    value = absl::StrReplaceAll(value, {{"/etc/shardps/tls/", dir + "/tls/"}});
  }
  const std::map<std::string, std::vector<std::string>> cluster = {
      {"chief", {"node-a.example:2222"}},
      {"ps", {"node-b.example:2222", "node-c.example:2222"}},
      {"worker", {"node-d.example:2222"}},
      {"evaluator", {"node-e.example:2222"}}};
  for (const std::string role : kRoles) {
    const std::string file = absl::StrCat(dir, "/", role, ".json");
    std::ofstream(file) << MakeTfConfig(cluster, role, 0);
    std::vector<std::string> argv = ExecStart(unit, role, file);
    ASSERT_GE(argv.size(), 2u);
    EXPECT_EQ(argv[0], "/usr/local/bin/" + role);
    std::vector<std::string> args(argv.begin() + 1, argv.end());
    args.push_back("--validate_config");
    // With the environment file's TLS, and with plaintext said explicitly.
    for (const auto& env : {tls, std::map<std::string, std::string>{{"SHARDPS_INSECURE", "1"}}}) {
      std::string output;
      auto code = RunCommand(BinaryPath(kBinaries.at(role)), args, env, &output);
      ASSERT_TRUE(code.ok()) << code.status();
      EXPECT_EQ(*code, 0) << role << ": " << output;
      EXPECT_TRUE(absl::StrContains(output, "node-")) << role << ": " << output;
    }
    // The variables reach the daemon: the example's paths, not made here, are refused.
    std::string output;
    auto code = RunCommand(BinaryPath(kBinaries.at(role)), args, EnvFile(), &output);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, kExitBadConfig) << role << ": " << output;
    EXPECT_TRUE(absl::StrContains(output, "/etc/shardps/tls/node.crt: cannot read the file"))
        << role << ": " << output;
  }
}

TEST(SystemdUnitTest, SystemdAcceptsTheUnitForEveryRole) {
  const char* const analyze = "/usr/bin/systemd-analyze";
  if (access(analyze, X_OK) != 0) {
    GTEST_SKIP() << analyze << " not found (Debian's systemd package): the unit is not checked";
  }
  const std::string dir = FreshTempDir("units");
  mkdir(dir.c_str(), 0755);
  // systemd checks that ExecStart's binary exists: point it at a directory of links to the
  // daemons Bazel built, named as the unit names them.
  const std::string bin = dir + "/bin";
  mkdir(bin.c_str(), 0755);
  for (const auto& [role, target] : kBinaries) {
    ASSERT_EQ(symlink(BinaryPath(target).c_str(), (bin + "/" + role).c_str()), 0) << role;
  }
  std::ofstream(dir + "/shardps@.service")
      << absl::StrReplaceAll(UnitText(), {{"/usr/local/bin/", bin + "/"}});
  for (const std::string role : kRoles) {
    const std::string instance = absl::StrCat(dir, "/shardps@", role, ".service");
    ASSERT_EQ(symlink("shardps@.service", instance.c_str()), 0) << role;
    std::string output;
    auto code = RunCommand(analyze, {"verify", instance}, {{"SYSTEMD_LOG_LEVEL", "notice"}},
                           &output);
    ASSERT_TRUE(code.ok()) << code.status();
    EXPECT_EQ(*code, 0) << role << ": " << output;
    // Unknown keys and bad values are warnings, with exit code 0: none may appear.
    EXPECT_EQ(output, "") << role;
  }
}

}  // namespace
}  // namespace testing
}  // namespace shardps
