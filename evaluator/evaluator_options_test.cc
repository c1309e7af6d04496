#include "evaluator/evaluator_options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

absl::Status Parse(const std::vector<std::string>& args, EvaluatorOptions* options) {
  FlagParser flags("evaluator", "test");
  options->AddFlags(&flags);
  return flags.Parse(args, nullptr);
}

TfConfig Config(bool with_chief, bool evaluator_listed) {
  TfConfig config;
  if (with_chief) config.cluster["chief"] = {"c:1"};
  config.cluster["ps"] = {"p:1"};
  if (evaluator_listed) config.cluster["evaluator"] = {"e:7"};
  config.task_type = "evaluator";
  return config;
}

TEST(EvaluatorOptionsTest, DefaultsAreTheDocumentedOnes) {
  EvaluatorOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.metrics_file, "evaluator_metrics.jsonl");
  EXPECT_EQ(options.backend, "cpu");
  EXPECT_EQ(options.threads, 1);
  EXPECT_FALSE(options.sidecar());
  EXPECT_EQ(options.poll_interval_s, 2);
}

TEST(EvaluatorOptionsTest, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--backend=tpu", "--backend: unknown backend \"tpu\": expected auto, cpu or gpu"},
      {"--threads=0", "--threads must be 1..1024, got 0"},
      {"--poll_interval_s=0", "--poll_interval_s must be > 0, got 0"},
      {"--poll_interval_s=nan", "--poll_interval_s must be > 0, got nan"},
  };
  for (const auto& [arg, message] : cases) {
    EvaluatorOptions options;
    absl::Status status = Parse({arg}, &options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << arg;
    EXPECT_EQ(status.message(), message) << arg;
  }
}

TEST(EvaluatorOptionsTest, PsModeNeedsAChiefToFollow) {
  EvaluatorOptions options;
  absl::Status status = options.Validate(nullptr);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("--checkpoint_dir"), std::string::npos) << status;
  const TfConfig chiefless = Config(false, true);
  status = options.Validate(&chiefless);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("cluster.chief"), std::string::npos) << status;
  const TfConfig with_chief = Config(true, true);
  EXPECT_TRUE(options.Validate(&with_chief).ok());
  EXPECT_TRUE(HasChief(&with_chief));
  EXPECT_FALSE(HasChief(nullptr));
}

TEST(EvaluatorOptionsTest, SidecarModeNeedsNoConfig) {
  EvaluatorOptions options;
  ASSERT_TRUE(Parse({"--checkpoint_dir=/ckpt"}, &options).ok());
  EXPECT_TRUE(options.sidecar());
  EXPECT_TRUE(options.Validate(nullptr).ok());
}

TEST(EvaluatorOptionsTest, HealthChecksAreAnsweredWhereTheClusterSays) {
  EvaluatorOptions options;
  EXPECT_EQ(options.HealthAddress(nullptr), "");
  const TfConfig listed = Config(true, true);
  EXPECT_EQ(options.HealthAddress(&listed), "e:7");
  const TfConfig outside = Config(true, false);  // TFJob: not in the cluster
  EXPECT_EQ(options.HealthAddress(&outside), "");
}

}  // namespace
}  // namespace shardps
