#include "client/row_chunks.h"

#include <map>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

using Ids = std::vector<int64_t>;

Ids Positions(size_t n) {
  Ids p(n);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<int64_t>(i) + 100;
  return p;
}

TEST(RowChunksTest, IdsThatFitStayOneChunkInTheirOrder) {
  for (bool together : {false, true}) {
    std::vector<RowChunk> chunks = SplitRows({5, 3, 5, 1}, Positions(4), 4, together);
    ASSERT_EQ(chunks.size(), 1u);
    EXPECT_EQ(chunks[0].ids, (Ids{5, 3, 5, 1}));
    EXPECT_EQ(chunks[0].positions, (Ids{100, 101, 102, 103}));
  }
  EXPECT_EQ(SplitRows({}, {}, 4, false).size(), 1u);  // one empty request, as before
}

TEST(RowChunksTest, PullsAreCutIntoRunsOfAtMostMaxRows) {
  std::vector<RowChunk> chunks = SplitRows({9, 8, 7, 6, 5, 4, 3}, Positions(7), 3, false);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].ids, (Ids{9, 8, 7}));
  EXPECT_EQ(chunks[1].ids, (Ids{6, 5, 4}));
  EXPECT_EQ(chunks[2].ids, (Ids{3}));
  EXPECT_EQ(chunks[2].positions, (Ids{106}));
  // At least one row per chunk.
  EXPECT_EQ(SplitRows({1, 2}, Positions(2), 0, false).size(), 2u);
}

TEST(RowChunksTest, PushesKeepEveryOccurrenceOfAnIdInOneChunk) {
  const Ids ids = {4, 7, 4, 2, 7, 4, 9, 2};
  std::vector<RowChunk> chunks = SplitRows(ids, Positions(ids.size()), 4, true);
  // Groups in first-appearance order: 4 (x3), 7 (x2), 2 (x2), 9 (x1).
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].ids, (Ids{4, 4, 4}));
  EXPECT_EQ(chunks[0].positions, (Ids{100, 102, 105}));  // in order of appearance
  EXPECT_EQ(chunks[1].ids, (Ids{7, 7, 2, 2}));
  EXPECT_EQ(chunks[1].positions, (Ids{101, 104, 103, 107}));
  EXPECT_EQ(chunks[2].ids, (Ids{9}));
  // Every position appears exactly once, and no id is in two chunks.
  std::map<int64_t, int> chunk_of;
  size_t total = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    total += chunks[c].ids.size();
    for (int64_t id : chunks[c].ids) {
      auto [it, added] = chunk_of.emplace(id, static_cast<int>(c));
      EXPECT_EQ(it->second, static_cast<int>(c)) << "id " << id;
    }
  }
  EXPECT_EQ(total, ids.size());
}

TEST(RowChunksTest, AnIdOccurringMoreThanMaxRowsGetsAChunkOfItsOwn) {
  std::vector<RowChunk> chunks = SplitRows({1, 3, 3, 3, 2}, Positions(5), 2, true);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].ids, (Ids{1}));
  EXPECT_EQ(chunks[1].ids, (Ids{3, 3, 3}));
  EXPECT_EQ(chunks[2].ids, (Ids{2}));
}

TEST(RowChunksTest, TheSameArgumentsGiveTheSameChunks) {
  Ids ids;
  for (int i = 0; i < 1000; ++i) ids.push_back((i * 7919) % 211);
  std::vector<RowChunk> a = SplitRows(ids, Positions(ids.size()), 37, true);
  std::vector<RowChunk> b = SplitRows(ids, Positions(ids.size()), 37, true);
  ASSERT_EQ(a.size(), b.size());
  for (size_t c = 0; c < a.size(); ++c) {
    EXPECT_EQ(a[c].ids, b[c].ids);
    EXPECT_EQ(a[c].positions, b[c].positions);
    EXPECT_LE(a[c].ids.size(), 37u);
  }
}

}  // namespace
}  // namespace shardps
