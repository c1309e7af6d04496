#include "bench/file_tail.h"

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app | std::ios::binary) << text;
}

// Waits (without a time limit a test could fail on) until the tail has seen `size` bytes.
void WaitForSize(const FileTail& tail, int64_t size) {
  while (tail.size() != size) absl::SleepFor(absl::Milliseconds(1));
}

TEST(FileTailTest, RecordsEachGrowthOfAFileThatAppearsLater) {
  const std::string path = TempPath("journal");
  std::remove(path.c_str());
  FileTail tail(path, absl::Milliseconds(1), /*keep_lines=*/false);
  EXPECT_EQ(tail.size(), 0);
  EXPECT_TRUE(tail.Growths().empty());
  Append(path, std::string(20, 'a'));
  WaitForSize(tail, 20);
  Append(path, std::string(40, 'b'));
  WaitForSize(tail, 60);
  const std::vector<FileTail::Growth> growths = tail.Growths();
  ASSERT_EQ(growths.size(), 2u);
  EXPECT_EQ(growths[0].size, 20);
  EXPECT_EQ(growths[1].size, 60);
  EXPECT_LE(growths[0].t, growths[1].t);
  EXPECT_LE(growths[1].t, NowSeconds());
}

TEST(FileTailTest, FindsWholeLinesOnlyAndAfterAGivenTime) {
  const std::string path = TempPath("log");
  std::remove(path.c_str());
  const std::string first = "ps: serving on 127.0.0.1:1\nchief: recovered from ps 1";
  const std::string rest = " (restarted)\n";
  Append(path, first);
  FileTail tail(path, absl::Milliseconds(1), /*keep_lines=*/true);
  WaitForSize(tail, static_cast<int64_t>(first.size()));
  FileTail::Line line;
  ASSERT_TRUE(tail.FindLine("serving on", 0, &line));
  EXPECT_EQ(line.text, "ps: serving on 127.0.0.1:1");
  // The second line has no newline yet: not a line.
  EXPECT_FALSE(tail.FindLine("recovered", 0, &line));
  const double before_end = NowSeconds();
  Append(path, rest);
  WaitForSize(tail, static_cast<int64_t>(first.size() + rest.size()));
  ASSERT_TRUE(tail.FindLine("recovered", 0, &line));
  EXPECT_EQ(line.text, "chief: recovered from ps 1 (restarted)");
  EXPECT_GE(line.t, before_end);
  // Lines seen before `after` are skipped.
  EXPECT_FALSE(tail.FindLine("serving on", before_end, &line));
}

TEST(FileTailTest, ReadsAReplacedFileFromItsStart) {
  const std::string path = TempPath("replaced");
  std::remove(path.c_str());
  const std::string long_line = "first line that is long\n";
  Append(path, long_line);
  FileTail tail(path, absl::Milliseconds(1), /*keep_lines=*/true);
  WaitForSize(tail, static_cast<int64_t>(long_line.size()));
  std::ofstream(path, std::ios::trunc) << "second\n";
  WaitForSize(tail, 7);
  FileTail::Line line;
  ASSERT_TRUE(tail.FindLine("second", 0, &line));
  EXPECT_EQ(line.text, "second");
}

}  // namespace
}  // namespace bench
}  // namespace shardps
