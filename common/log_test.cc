#include "common/log.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::EndsWith;
using ::testing::MatchesRegex;

const absl::Time kTime = absl::FromUnixMillis(1793882096789);  // 2026-11-05T12:34:56.789Z

TEST(LogTest, ALineIsTimeDaemonSeverityAndMessage) {
  EXPECT_EQ(FormatLogLine(kTime, "chief", LogSeverity::kInfo, "job fm-1 started"),
            "2026-11-05T12:34:56.789Z chief: job fm-1 started");
  EXPECT_EQ(FormatLogLine(kTime, "ps", LogSeverity::kWarning, "slow"),
            "2026-11-05T12:34:56.789Z ps: warning: slow");
  EXPECT_EQ(FormatLogLine(kTime, "chief", LogSeverity::kError, "ps:0 (a:1): down"),
            "2026-11-05T12:34:56.789Z chief: error: ps:0 (a:1): down");
}

TEST(LogTest, WithoutADaemonTheNameIsLeftOut) {
  EXPECT_EQ(FormatLogLine(kTime, "", LogSeverity::kInfo, "hello"), "2026-11-05T12:34:56.789Z hello");
  EXPECT_EQ(FormatLogLine(kTime, "", LogSeverity::kError, "bad"),
            "2026-11-05T12:34:56.789Z error: bad");
}

TEST(LogTest, ARecordIsOneLine) {
  EXPECT_EQ(FormatLogLine(kTime, "ps", LogSeverity::kInfo, "a\nb\r\nc"),
            "2026-11-05T12:34:56.789Z ps: a b  c");
}

TEST(LogTest, StreamedRecordsGoToStderrWithTheDaemonSet) {
  SetLogDaemon("worker");
  EXPECT_EQ(LogDaemon(), "worker");
  ::testing::internal::CaptureStderr();
  LogInfo() << "serving on " << "127.0.0.1:" << 2222;
  LogError() << absl::InvalidArgumentError("bad shape");
  const std::string out = ::testing::internal::GetCapturedStderr();
  SetLogDaemon("");
  std::vector<std::string> lines = absl::StrSplit(out, '\n');
  ASSERT_EQ(lines.size(), 3u) << out;
  EXPECT_EQ(lines[2], "");
  EXPECT_THAT(lines[0], MatchesRegex("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z .*"));
  EXPECT_THAT(lines[0], EndsWith(" worker: serving on 127.0.0.1:2222"));
  EXPECT_THAT(lines[1], EndsWith(" worker: error: INVALID_ARGUMENT: bad shape"));
}

TEST(LogTest, RecordsOfConcurrentThreadsDoNotInterleave) {
  SetLogDaemon("ps");
  ::testing::internal::CaptureStderr();
  std::vector<std::thread> threads;
  constexpr int kThreads = 8, kRecords = 200;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      for (int i = 0; i < kRecords; ++i) {
        LogMessage record(LogSeverity::kInfo);
        // Built piece by piece: only the record as a whole is written.
        for (int k = 0; k < 20; ++k) record << "t" << t << ".";
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  const std::string out = ::testing::internal::GetCapturedStderr();
  SetLogDaemon("");
  int lines = 0;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    ++lines;
    const size_t colon = line.find("ps: t");
    ASSERT_NE(colon, absl::string_view::npos) << line;
    const std::string piece(line.substr(colon + 4, line.find('.', colon) - colon - 3));
    std::string expected;
    for (int k = 0; k < 20; ++k) expected += piece;
    EXPECT_EQ(line.substr(colon + 4), expected);
  }
  EXPECT_EQ(lines, kThreads * kRecords);
}

}  // namespace
}  // namespace shardps
