#include "coordinator/chief_options.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

absl::Status Parse(const std::vector<std::string>& args, ChiefOptions* options) {
  FlagParser flags("chief", "test");
  options->AddFlags(&flags);
  absl::Status parsed = flags.Parse(args, nullptr);
  return parsed.ok() ? options->Validate() : parsed;
}

TfConfig Cluster(bool with_evaluator) {
  TfConfig config;
  config.cluster["chief"] = {"a:1"};
  config.cluster["ps"] = {"a:2"};
  if (with_evaluator) config.cluster["evaluator"] = {"a:3"};
  config.task_type = "chief";
  return config;
}

TEST(ChiefOptionsTest, DefaultsAreTheDocumentedOnes) {
  ChiefOptions options;
  ASSERT_TRUE(Parse({}, &options).ok());
  EXPECT_EQ(options.job_file, "");
  EXPECT_EQ(options.checkpoint_every(), absl::Seconds(30));
  EXPECT_EQ(options.final_eval_timeout_s, 120);
  EXPECT_EQ(options.ps_wait_s, 300);
  EXPECT_EQ(options.interrupt_timeout_s, 60);
  EXPECT_EQ(options.resume_mode(), SubmitJobRequest::AUTO);
  EXPECT_TRUE(options.has_evaluator(Cluster(true)));
  EXPECT_FALSE(options.has_evaluator(Cluster(false)));
}

TEST(ChiefOptionsTest, BadValuesAreRefusedNamingTheFlag) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--resume", "--fresh"}, "--resume and --fresh exclude each other"},
      {{"--evaluator=maybe"}, "--evaluator must be auto, yes or no, got \"maybe\""},
      {{"--final_eval_timeout_s=-1"}, "--final_eval_timeout_s must be 0..31536000, got -1"},
      {{"--ps_wait_s=31536001"}, "--ps_wait_s must be 0..31536000, got 31536001"},
      {{"--checkpoint_every_s=-5"}, "--checkpoint_every_s must be 0..31536000, got -5"},
      {{"--interrupt_timeout_s=-1"}, "--interrupt_timeout_s must be 0..31536000, got -1"},
  };
  for (const auto& [args, message] : cases) {
    ChiefOptions options;
    absl::Status status = Parse(args, &options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << args[0];
    EXPECT_EQ(status.message(), message) << args[0];
  }
}

TEST(ChiefOptionsTest, FlagsSetWhatTheChiefIsGiven) {
  ChiefOptions options;
  ASSERT_TRUE(Parse({"--fresh", "--evaluator=yes", "--checkpoint_every_s=0"}, &options).ok());
  EXPECT_EQ(options.resume_mode(), SubmitJobRequest::FRESH);
  EXPECT_TRUE(options.has_evaluator(Cluster(false)));
  EXPECT_EQ(options.checkpoint_every(), absl::Seconds(30));  // 0: the default
  ChiefOptions resume;
  ASSERT_TRUE(Parse({"--resume", "--evaluator=no", "--checkpoint_every_s=5"}, &resume).ok());
  EXPECT_EQ(resume.resume_mode(), SubmitJobRequest::RESUME);
  EXPECT_FALSE(resume.has_evaluator(Cluster(true)));
  EXPECT_EQ(resume.checkpoint_every(), absl::Seconds(5));
}

}  // namespace
}  // namespace shardps
