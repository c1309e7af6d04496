#include "observability/summary_writer.h"

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/test_files.h"
#include "gtest/gtest.h"
#include "observability/tfevents_reader.h"

namespace shardps {
namespace {

struct Logged {
  std::vector<std::string> errors;
  std::vector<std::string> infos;
};

SummaryWriter::Options Capture(Logged* logged) {
  SummaryWriter::Options options;
  options.log_error = [logged](absl::string_view line) { logged->errors.emplace_back(line); };
  options.log_info = [logged](absl::string_view line) { logged->infos.emplace_back(line); };
  return options;
}

TEST(SummaryWriterTest, MakesItsDirectoryAndFileOnTheFirstWrite) {
  const std::string dir = MakeTestDir("summary") + "/tensorboard/evaluator";
  Logged logged;
  SummaryWriter writer(dir, Capture(&logged));
  EXPECT_EQ(writer.path(), "");
  EXPECT_FALSE(PathExists(dir));
  ASSERT_TRUE(writer.Write(100, {{"eval/accuracy", 0.8}, {"eval/loss", 0.4}}));
  ASSERT_TRUE(writer.Write(200, {{"eval/accuracy", 0.85}, {"eval/loss", 0.35}}));
  EXPECT_TRUE(absl::StartsWith(writer.path(), dir + "/events.out.tfevents."));
  auto events = ReadTfEvents(writer.path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);
  EXPECT_EQ((*events)[2].step(), 200);
  EXPECT_EQ((*events)[2].summary().value(1).tag(), "eval/loss");
  EXPECT_EQ((*events)[2].summary().value(1).simple_value(), 0.35f);
  EXPECT_TRUE(logged.errors.empty());
}

// The caller goes on whatever the disk does: each failing write returns false, the failure
// is said once, and the series resumes once the directory can be made.
TEST(SummaryWriterTest, SaysAFailureOnceAndResumesWhenTheDirectoryCanBeMade) {
  const std::string root = MakeTestDir("summary");
  const std::string blocker = root + "/tensorboard";
  WriteFileBytes(blocker, "a file where the directory should be");
  Logged logged;
  SummaryWriter writer(blocker + "/chief", Capture(&logged));
  EXPECT_FALSE(writer.Write(1, {{"train/loss", 2.0}}));
  EXPECT_FALSE(writer.Write(2, {{"train/loss", 1.5}}));
  ASSERT_EQ(logged.errors.size(), 1u);
  EXPECT_TRUE(absl::StrContains(logged.errors[0], blocker + "/chief")) << logged.errors[0];
  EXPECT_TRUE(absl::StrContains(logged.errors[0], "said once")) << logged.errors[0];
  EXPECT_EQ(writer.path(), "");

  std::filesystem::remove(blocker);
  ASSERT_TRUE(writer.Write(3, {{"train/loss", 1.0}}));
  ASSERT_TRUE(writer.Write(4, {{"train/loss", 0.5}}));
  ASSERT_EQ(logged.infos.size(), 1u);
  EXPECT_TRUE(absl::StrContains(logged.infos[0], "writing again")) << logged.infos[0];
  EXPECT_EQ(logged.errors.size(), 1u);
  auto events = ReadTfEvents(writer.path());
  ASSERT_TRUE(events.ok()) << events.status();
  ASSERT_EQ(events->size(), 3u);  // the version, steps 3 and 4
  EXPECT_EQ((*events)[1].step(), 3);
  EXPECT_EQ((*events)[2].step(), 4);
}

}  // namespace
}  // namespace shardps
