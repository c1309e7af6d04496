#include "common/protocol_version.h"

#include "common/error_detail.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

TEST(ProtocolVersionTest, HeaderRoundTrips) {
  EXPECT_EQ(FormatProtocolHeader({1, 3}), "1-3");
  auto parsed = ParseProtocolHeader("1-3");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, (ProtocolRange{1, 3}));
  parsed = ParseProtocolHeader("4");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, (ProtocolRange{4, 4}));
}

TEST(ProtocolVersionTest, BadHeadersAreNamed) {
  for (const char* text : {"", "-", "1-", "-1", "0", "0-1", "2-1", "1-2-3", "x", "+1", " 1",
                           "1.0", "1-2 ", "99999999999"}) {
    auto parsed = ParseProtocolHeader(text);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << "\"" << text << "\"";
    EXPECT_THAT(parsed.status().message(), HasSubstr("bad shardps protocol version")) << text;
  }
}

TEST(ProtocolVersionTest, OverlappingRangesAreCompatible) {
  EXPECT_TRUE(CheckProtocolCompatible({1, 1}, {1, 1}, "the client", "this ps").ok());
  // A rolling upgrade: the new release still speaks the old one's version.
  EXPECT_TRUE(CheckProtocolCompatible({1, 1}, {1, 2}, "the client", "this ps").ok());
  EXPECT_TRUE(CheckProtocolCompatible({1, 2}, {1, 1}, "the client", "this ps").ok());
  EXPECT_TRUE(CheckProtocolCompatible({2, 3}, {1, 2}, "the client", "this ps").ok());
}

TEST(ProtocolVersionTest, DisjointRangesFailNamingBoth) {
  absl::Status s = CheckProtocolCompatible({2, 3}, {1, 1}, "the client", "this ps");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("the client speaks protocol 3 (compatible back to 2)"));
  EXPECT_THAT(s.message(), HasSubstr("this ps speaks protocol 1"));
  EXPECT_EQ(DetailKind(s), ErrorDetail::PROTOCOL_MISMATCH);
  s = CheckProtocolCompatible({1, 1}, {2, 2}, "the chief", "this worker");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("the chief speaks protocol 1, this worker speaks protocol 2"));
}

TEST(ProtocolVersionTest, LocalProtocolDefaultsToTheBuildsAndCanBeOverriddenForTests) {
  EXPECT_EQ(LocalProtocol(), (ProtocolRange{kMinProtocolVersion, kProtocolVersion}));
  SetLocalProtocolForTesting({5, 7});
  EXPECT_EQ(LocalProtocol(), (ProtocolRange{5, 7}));
  SetLocalProtocolForTesting({kMinProtocolVersion, kProtocolVersion});
}

}  // namespace
}  // namespace shardps
