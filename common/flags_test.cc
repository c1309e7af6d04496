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
