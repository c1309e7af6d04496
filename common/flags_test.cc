#include "common/flags.h"

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(FlagParserTest, ParsesAllForms) {
  std::string s = "x";
  int64_t n = 1;
  double d = 0.5;
  bool b = false, c = true;
  FlagParser parser("prog", "does things");
  parser.AddString("name", &s, "a name");
  parser.AddInt("count", &n, "a count");
  parser.AddDouble("rate", &d, "a rate");
  parser.AddBool("verbose", &b, "talk");
  parser.AddBool("color", &c, "paint");
  std::vector<std::string> pos;
  ASSERT_TRUE(parser
                  .Parse({"--name=ab", "--count", "7", "pos1", "--rate=0.25", "--verbose",
                          "--nocolor", "--", "--pos2"},
                         &pos)
                  .ok());
  EXPECT_EQ(s, "ab");
  EXPECT_EQ(n, 7);
  EXPECT_DOUBLE_EQ(d, 0.25);
  EXPECT_TRUE(b);
  EXPECT_FALSE(c);
  EXPECT_EQ(pos, (std::vector<std::string>{"pos1", "--pos2"}));
  EXPECT_FALSE(parser.help_requested());
}

TEST(FlagParserTest, ErrorsNameTheFlag) {
  int64_t n = 1;
  FlagParser parser("prog", "");
  parser.AddInt("count", &n, "");
  absl::Status s = parser.Parse({"--count=abc"}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--count"), std::string::npos);
  s = parser.Parse({"--bogus=1"}, nullptr);
  EXPECT_NE(s.message().find("unknown flag --bogus"), std::string::npos);
  s = parser.Parse({"--count"}, nullptr);
  EXPECT_NE(s.message().find("needs a value"), std::string::npos);
  s = parser.Parse({"stray"}, nullptr);
  EXPECT_NE(s.message().find("stray"), std::string::npos);
  EXPECT_EQ(n, 1);
}

TEST(FlagParserTest, RangesRefuseValuesOutsideThemInOneForm) {
  int64_t threads = 4, budget = -1;
  double reserve = 0.5, timeout = 1, interval = 2;
  std::string mode = "auto";
  FlagParser parser("prog", "");
  parser.AddInt("threads", &threads, "", {1, 256});
  parser.AddInt("budget", &budget, "", IntRange::AtLeast(-1));
  parser.AddDouble("reserve", &reserve, "", DoubleRange::HalfOpen(0, 1));
  parser.AddDouble("timeout", &timeout, "", DoubleRange::AtLeast(0));
  parser.AddDouble("interval", &interval, "", DoubleRange::GreaterThan(0));
  parser.AddChoice("mode", &mode, "", {"auto", "yes", "no"});
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--threads=0", "--threads must be 1..256, got 0"},
      {"--threads=257", "--threads must be 1..256, got 257"},
      {"--budget=-2", "--budget must be >= -1, got -2"},
      {"--reserve=1", "--reserve must be in [0, 1), got 1"},
      {"--reserve=-0.5", "--reserve must be in [0, 1), got -0.5"},
      {"--timeout=-1", "--timeout must be >= 0, got -1"},
      {"--timeout=nan", "--timeout must be >= 0, got nan"},
      {"--interval=0", "--interval must be > 0, got 0"},
      {"--mode=maybe", "--mode must be auto, yes or no, got \"maybe\""},
  };
  for (const auto& [arg, message] : bad) {
    absl::Status s = parser.Parse({arg}, nullptr);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << arg;
    EXPECT_EQ(s.message(), message) << arg;
  }
  // Nothing was set by a refused value.
  EXPECT_EQ(threads, 4);
  EXPECT_EQ(budget, -1);
  EXPECT_EQ(reserve, 0.5);
  EXPECT_EQ(mode, "auto");
  ASSERT_TRUE(parser
                  .Parse({"--threads=256", "--budget=-1", "--reserve=0", "--timeout=0",
                          "--interval=0.001", "--mode=no"},
                         nullptr)
                  .ok());
  EXPECT_EQ(threads, 256);
  EXPECT_EQ(reserve, 0);
  EXPECT_EQ(mode, "no");
  // --help tells the values each flag takes.
  const std::string usage = parser.Usage();
  EXPECT_NE(usage.find("(default: 4; 1..256)"), std::string::npos) << usage;
  EXPECT_NE(usage.find("(default: 0.5; in [0, 1))"), std::string::npos) << usage;
  EXPECT_NE(usage.find("(default: auto; auto, yes or no)"), std::string::npos) << usage;
}

TEST(FlagParserTest, ACheckedStringNamesTheFlagBeforeTheChecksMessage) {
  std::string backend;
  FlagParser parser("prog", "");
  parser.AddString("backend", &backend, "", [](const std::string& value) {
    return value == "cpu" ? absl::OkStatus() : absl::InvalidArgumentError("unknown backend");
  });
  absl::Status s = parser.Parse({"--backend=tpu"}, nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "--backend: unknown backend");
  EXPECT_EQ(backend, "");
  ASSERT_TRUE(parser.Parse({"--backend=cpu"}, nullptr).ok());
  EXPECT_EQ(backend, "cpu");
}

TEST(FlagParserTest, HelpAndExitCodes) {
  bool b = false;
  FlagParser parser("prog", "summary");
  parser.AddBool("verbose", &b, "talk more");
  ASSERT_TRUE(parser.Parse({"--help"}, nullptr).ok());
  EXPECT_TRUE(parser.help_requested());
  EXPECT_NE(parser.Usage().find("--verbose"), std::string::npos);
  EXPECT_EQ(HandleParseResult(parser, absl::OkStatus()), 0);
  EXPECT_EQ(HandleParseResult(parser, absl::InvalidArgumentError("x")), 2);
  FlagParser quiet("prog", "");
  EXPECT_EQ(HandleParseResult(quiet, absl::OkStatus()), -1);
}

}  // namespace
}  // namespace shardps
