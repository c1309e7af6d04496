#include "rpc/audit_lines.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(AuditLinesTest, RepeatsWithinTheWindowAreCountedAndTheCountWrittenBeforeTheNextLine) {
  AuditLines audit(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  // The chief's calls come over two connections: one host, two ports.
  auto line = [](int port) {
    return absl::StrCat("PsService.MoveBuckets by chief from ipv4:10.0.0.1:", port);
  };
  const std::string key =
      absl::StrCat("PsService.MoveBuckets by chief from ", PeerHost("ipv4:10.0.0.1:5000"));
  const std::string move = line(5000);
  EXPECT_THAT(audit.Add(key, move, t0), ElementsAre(move));
  for (int i = 1; i <= 1499; ++i) {
    EXPECT_THAT(audit.Add(key, line(5000 + i % 2), t0 + absl::Milliseconds(5 * i)), IsEmpty())
        << i;
  }
  const std::string cancel = "CoordinatorService.CancelJob by admin from ipv4:10.0.0.9:6000";
  EXPECT_THAT(audit.Add(cancel, cancel, t0 + absl::Seconds(9)),
              ElementsAre("the audited call above was made 1499 more times until "
                          "22:13:27.495 UTC",
                          cancel));
  // A different line is written whole even right after; nothing was folded into it.
  EXPECT_THAT(audit.Add(key, move, t0 + absl::Seconds(9)), ElementsAre(move));
}

TEST(AuditLinesTest, ARunLongerThanTheWindowStartsAgainWithAWholeLine) {
  AuditLines audit(absl::Seconds(10));
  const absl::Time t0 = absl::FromUnixSeconds(1700000000);
  EXPECT_THAT(audit.Add("a", "a", t0), ElementsAre("a"));
  EXPECT_THAT(audit.Add("a", "a", t0 + absl::Seconds(4)), IsEmpty());
  EXPECT_THAT(audit.Add("a", "a", t0 + absl::Seconds(11)),
              ElementsAre("the audited call above was made 1 more time until 22:13:24.000 UTC",
                          "a"));
  EXPECT_THAT(audit.Add("a", "a", t0 + absl::Seconds(30)), ElementsAre("a"));  // no repeats
}

TEST(AuditLinesTest, PeerHostDropsThePortOnly) {
  EXPECT_EQ(PeerHost("ipv4:10.0.0.1:5000"), "ipv4:10.0.0.1");
  EXPECT_EQ(PeerHost("ipv6:[::1]:5000"), "ipv6:[::1]");
  EXPECT_EQ(PeerHost("unix:/run/shardps.sock"), "unix:/run/shardps.sock");
  EXPECT_EQ(PeerHost("ipv6:[::1]"), "ipv6:[::1]");
}

}  // namespace
}  // namespace shardps
