#include "client/versions_seen.h"

#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(VersionsSeenTest, KeepsTheRangeAndEachShardsLowest) {
  VersionsSeen seen;
  seen.Add("a", 5);
  seen.Add("b", 3);
  seen.Add("a", 4);  // a second chunk of a
  seen.Add("a", 7);
  PullVersions versions;
  seen.Fill(&versions);
  EXPECT_EQ(versions.min_version, 3);
  EXPECT_EQ(versions.max_version, 7);
  EXPECT_EQ(versions.shards.at("a"), 4);
  EXPECT_EQ(versions.shards.at("b"), 3);
}

TEST(VersionsSeenTest, PartsCompleteOnAnyThread) {
  VersionsSeen seen;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&seen, t] {
      for (int i = 0; i < 100; ++i) seen.Add(absl::StrCat("s", i % 10), t * 100 + i);
    });
  }
  for (std::thread& t : threads) t.join();
  PullVersions versions;
  seen.Fill(&versions);
  EXPECT_EQ(versions.min_version, 0);
  EXPECT_EQ(versions.max_version, 399);
  EXPECT_EQ(versions.shards.size(), 10u);
  EXPECT_EQ(versions.shards.at("s9"), 9);
}

}  // namespace
}  // namespace shardps
