#include "ps_server/param_blocks.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

// Fills every element with its index.
void FillIota(ParamBlocks& p) {
  p.Writable(0, p.rows());
  p.ForEachRun(0, p.size(), [](int64_t first, float* v, int64_t n) {
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(first + i);
  });
}

std::string Joined(const std::vector<absl::string_view>& pieces) {
  std::string all;
  for (absl::string_view p : pieces) all.append(p.data(), p.size());
  return all;
}

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

TEST(ParamBlocksTest, BlocksHoldWholeRowsUpToAMiB) {
  ParamBlocks narrow(1 << 20, 1);  // 4 MiB of one-float rows: 1 MiB blocks
  EXPECT_EQ(narrow.rows_per_block(), 1 << 18);
  EXPECT_EQ(narrow.num_blocks(), 4);
  ParamBlocks odd(1000, 300);  // 1200-byte rows: 512 rows (600 KiB) per block
  EXPECT_EQ(odd.rows_per_block(), 512);
  EXPECT_EQ(odd.num_blocks(), 2);
  ParamBlocks wide(3, 1 << 19);  // 2 MiB rows: one row per block
  EXPECT_EQ(wide.rows_per_block(), 1);
  EXPECT_EQ(wide.num_blocks(), 3);
}

TEST(ParamBlocksTest, RunsRowsAndCopiesAgreeAcrossBlocks) {
  ParamBlocks p(1000, 300);
  FillIota(p);
  std::vector<float> out(700 * 300);
  p.CopyOut(200 * 300, 900 * 300, out.data());
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], static_cast<float>(200 * 300 + i));
  for (int64_t r : {0, 511, 512, 999}) EXPECT_EQ(p.Row(r)[7], static_cast<float>(r * 300 + 7));
  const RowBlocks rows = p.Writable(0, 1000);
  for (int64_t r : {0, 511, 512, 999}) EXPECT_EQ(rows.Row(r), p.Row(r));
  int runs = 0;
  p.ForEachRun(500 * 300 + 1, 520 * 300, [&](int64_t, const float*, int64_t) { ++runs; });
  EXPECT_EQ(runs, 2);  // split at the block boundary, row 512
}

TEST(ParamBlocksTest, ASharedBlockIsCopiedOnWriteAndTheShareKeepsItsBytes) {
  ParamBlocks p(1000, 300);
  FillIota(p);
  std::vector<float> before(1000 * 300);
  p.CopyOut(0, p.size(), before.data());
  std::vector<absl::string_view> pieces;
  std::vector<std::shared_ptr<const void>> holds;
  p.Share(100 * 300, 600 * 300, &pieces, &holds);  // both blocks
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].data(), reinterpret_cast<const char*>(p.Row(100)));  // no copy
  const std::vector<float> shared(before.begin() + 100 * 300, before.begin() + 600 * 300);

  // A write to row 700 (block 1) copies block 1 only; the share still reads the old bytes.
  RowBlocks rows = p.Writable(700, 701);
  rows.Row(700)[0] = -1.0f;
  EXPECT_EQ(p.copies(), 1);
  EXPECT_EQ(Joined(pieces), Bytes(shared));
  EXPECT_EQ(p.Row(700)[0], -1.0f);
  EXPECT_EQ(p.Row(700)[1], static_cast<float>(700 * 300 + 1));  // the copy kept the rest

  // Block 0 is still shared: writing row 5 copies it too. Writing it again does not.
  p.WritableRows({5}).Row(5)[0] = -2.0f;
  p.WritableRows({6}).Row(6)[0] = -3.0f;
  EXPECT_EQ(p.copies(), 2);
  EXPECT_EQ(Joined(pieces), Bytes(shared));

  // Once the share is dropped, writes go in place.
  pieces.clear();
  holds.clear();
  const float* row0 = p.Row(0);
  p.Writable(0, 1000);
  EXPECT_EQ(p.copies(), 2);
  EXPECT_EQ(p.Row(0), row0);
}

TEST(ParamBlocksTest, FillCopiesSharedBlocksAndMovesKeepShares) {
  ParamBlocks p(1000, 300);
  FillIota(p);
  std::vector<absl::string_view> pieces;
  std::vector<std::shared_ptr<const void>> holds;
  p.Share(0, 300, &pieces, &holds);  // row 0, block 0
  p.Fill(2.5f);
  EXPECT_EQ(p.copies(), 1);
  std::vector<float> row0(300);
  std::memcpy(row0.data(), pieces[0].data(), 1200);
  EXPECT_EQ(row0[7], 7.0f);  // the share still reads the values before Fill
  for (int64_t r : {0, 511, 512, 999}) EXPECT_EQ(p.Row(r)[299], 2.5f);

  // A moved ParamBlocks keeps its blocks (and the share stays valid).
  ParamBlocks moved = std::move(p);
  EXPECT_EQ(moved.rows(), 1000);
  EXPECT_EQ(moved.Row(999)[0], 2.5f);
  std::memcpy(row0.data(), pieces[0].data(), 1200);
  EXPECT_EQ(row0[299], 299.0f);
}

}  // namespace
}  // namespace shardps
