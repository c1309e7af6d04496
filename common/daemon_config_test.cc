#include "common/daemon_config.h"

#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/tf_config.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

std::string J(absl::string_view single_quoted) {
  return absl::StrReplaceAll(single_quoted, {{"'", "\""}});
}

const std::string kPsConfig =
    J("{'cluster': {'chief': ['c:2222'], 'ps': ['localhost:2222', 'localhost:2223'], "
      "'worker': ['w:2222']}, 'task': {'type': 'ps', 'index': 1}}");

TEST(DaemonConfigTest, ValidConfigPrintsTaskAndAddress) {
  std::ostringstream out, err;
  EXPECT_EQ(ValidateConfigMain(ParseTfConfig(kPsConfig), "ps", out, err), kConfigValid);
  EXPECT_EQ(out.str(), "TF_CONFIG OK: ps:1 at localhost:2223 (cluster: chief=1 ps=2 worker=1)\n");
  EXPECT_EQ(err.str(), "");
}

TEST(DaemonConfigTest, AnyTypeWhenExpectedIsEmpty) {
  std::ostringstream out, err;
  EXPECT_EQ(ValidateConfigMain(ParseTfConfig(kPsConfig), "", out, err), 0);
  EXPECT_THAT(out.str(), HasSubstr("ps:1 at localhost:2223"));
}

TEST(DaemonConfigTest, EvaluatorOutsideTheCluster) {
  std::ostringstream out, err;
  const std::string config =
      J("{'cluster': {'ps': ['p:1']}, 'task': {'type': 'evaluator', 'index': 0}}");
  EXPECT_EQ(ValidateConfigMain(ParseTfConfig(config), "evaluator", out, err), 0);
  EXPECT_EQ(out.str(), "TF_CONFIG OK: evaluator:0 (not in cluster) (cluster: ps=1)\n");
}

TEST(DaemonConfigTest, WrongTaskTypeForTheDaemon) {
  std::ostringstream out, err;
  EXPECT_EQ(ValidateConfigMain(ParseTfConfig(kPsConfig), "worker", out, err), kConfigInvalid);
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(err.str(),
            "TF_CONFIG: task.type: \"ps\" does not match this daemon, which runs \"worker\" "
            "tasks\n");
}

TEST(DaemonConfigTest, InvalidConfigPrintsOneLineAndReturnsTwo) {
  std::ostringstream out, err;
  const std::string config =
      J("{'cluster': {'ps': ['localhost:2222', 'localhost:99999']}, "
        "'task': {'type': 'ps', 'index': 0}}");
  EXPECT_EQ(ValidateConfigMain(ParseTfConfig(config), "ps", out, err), 2);
  EXPECT_EQ(err.str(),
            "TF_CONFIG: cluster.ps[1]: \"localhost:99999\": port must be 1..65535\n");
  EXPECT_EQ(out.str(), "");
}

TEST(DaemonConfigTest, MissingConfig) {
  std::ostringstream out, err;
  EXPECT_EQ(ValidateConfigMain(LoadTfConfig("", nullptr), "ps", out, err), 2);
  EXPECT_EQ(err.str(), "TF_CONFIG is not set and --tf_config was not given\n");
}

TEST(DaemonConfigTest, ForeignMultiLineErrorsStayOnOneLine) {
  std::ostringstream out, err;
  EXPECT_EQ(ValidateConfigMain(absl::InternalError("a\nb"), "", out, err), 2);
  EXPECT_EQ(err.str(), "a b\n");
}

TEST(DaemonConfigTest, CheckTaskType) {
  TfConfig config = *ParseTfConfig(kPsConfig);
  EXPECT_TRUE(CheckTaskType(config, "ps").ok());
  EXPECT_TRUE(CheckTaskType(config, "").ok());
  absl::Status status = CheckTaskType(config, "chief");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("task.type"));
}

TEST(DaemonConfigTest, LoadDaemonConfig) {
  absl::StatusOr<TfConfig> config = LoadDaemonConfig("", kPsConfig.c_str(), "ps");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->TaskAddress(), "localhost:2223");
  config = LoadDaemonConfig(kPsConfig, nullptr, "worker");
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr("task.type: \"ps\""));
  EXPECT_EQ(LoadDaemonConfig("", nullptr, "ps").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace shardps
