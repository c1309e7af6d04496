#include "client/variable_layout.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"

namespace shardps {
namespace {

VariableDef Def(const std::string& name, std::vector<int64_t> shape) {
  VariableDef def;
  def.name = name;
  def.shape = std::move(shape);
  return def;
}

TEST(VariableLayoutTest, MakeLayoutOfMatrixScalarAndDynamicTable) {
  VariableLayout m = MakeLayout("m", {6, 4});
  EXPECT_EQ(m.rows, 6);
  EXPECT_EQ(m.row_width, 4);
  EXPECT_EQ(m.num_elements, 24);
  VariableLayout s = MakeLayout("s", {});
  EXPECT_EQ(s.rows, 1);
  EXPECT_EQ(s.row_width, 1);
  VariableLayout t = MakeLayout("t", {0, 8});
  EXPECT_EQ(t.rows, 0);
  EXPECT_EQ(t.row_width, 8);
  EXPECT_EQ(t.num_elements, 0);
}

TEST(VariableLayoutTest, ChecksDefs) {
  EXPECT_EQ(CheckVariableDef(Def("", {1})).message(), "variable name is empty");
  EXPECT_TRUE(absl::StrContains(CheckVariableDef(Def("m", {3, 0})).message(),
                                "variable \"m\": shape[1] is 0; dimensions must be positive"));
  VariableDef table = Def("t", {0, 4});
  EXPECT_FALSE(CheckVariableDef(table).ok());
  table.dynamic = DynamicTableDef{};
  EXPECT_TRUE(CheckVariableDef(table).ok());
}

TEST(VariableLayoutTest, PlacesDenseShardsAndRebuildsThemFromWhatThePsHold) {
  auto partitioner = *NewFixedShardsPartitioner(3);
  auto placer = *NewRoundRobinPlacer(2);
  std::vector<CreateShardsRequest> requests(2);
  absl::StatusOr<VariableLayout> layout =
      PlaceDense(Def("m", {7, 2}), *partitioner, placer.get(), 2, &requests);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->shards.size(), 3u);
  EXPECT_EQ(requests[0].shards_size(), 2);
  EXPECT_EQ(requests[1].shards_size(), 1);
  int64_t next = 0;
  for (const VariableLayout::Shard& shard : layout->shards) {
    EXPECT_EQ(shard.row_offset, next);
    next += shard.rows;
  }
  EXPECT_EQ(next, 7);

  std::vector<ListShardsResponse> listed(2);
  for (int p = 0; p < 2; ++p) {
    for (const ShardSpec& spec : requests[p].shards())
      *listed[p].add_shards()->mutable_spec() = spec;
  }
  absl::StatusOr<std::map<std::string, VariableLayout>> found = LayoutsFromShards(listed);
  ASSERT_TRUE(found.ok()) << found.status();
  const VariableLayout& rebuilt = found->at("m");
  ASSERT_EQ(rebuilt.shards.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rebuilt.shards[i].ps, layout->shards[i].ps);
    EXPECT_EQ(rebuilt.shards[i].row_offset, layout->shards[i].row_offset);
  }
  // Without ps 1's shard the rows are not tiled.
  listed[1].clear_shards();
  const absl::Status missing = LayoutsFromShards(listed).status();
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(missing.message(), "is a ps task missing?")) << missing;
}

TEST(VariableLayoutTest, PlacesADynamicTableOneRunOfBucketsPerPs) {
  VariableDef def = Def("t", {0, 4});
  def.dynamic = DynamicTableDef{};
  def.dynamic->num_buckets = 10;
  def.dynamic->max_rows = 7;
  std::vector<CreateShardsRequest> requests(3);
  absl::StatusOr<VariableLayout> layout = PlaceDynamic(def, 3, &requests);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_TRUE(layout->dynamic);
  int32_t next = 0;
  int64_t max_rows = 0;
  for (int p = 0; p < 3; ++p) {
    ASSERT_EQ(requests[p].shards_size(), 1);
    const DynamicSpec& d = requests[p].shards(0).dynamic();
    EXPECT_EQ(d.bucket_begin(), next);
    next = d.bucket_end();
    max_rows += d.max_rows();
    EXPECT_EQ(requests[p].shards(0).name(), absl::StrCat("t/part_", p));
  }
  EXPECT_EQ(next, 10);
  EXPECT_GE(max_rows, 7);  // shares rounded up

  def.dynamic->num_buckets = 2;
  EXPECT_TRUE(absl::StrContains(PlaceDynamic(def, 3, &requests).status().message(),
                                "num_buckets 2 is below the 3 ps tasks"));
}

TEST(VariableLayoutTest, ChunksAndRoutesRows) {
  VariableLayout layout = MakeLayout("m", {5, 2});
  layout.shards.push_back({ShardSpec(), 0, 0, 3});
  layout.shards.push_back({ShardSpec(), 1, 3, 2});
  std::vector<std::pair<int64_t, int64_t>> chunks;
  ForEachChunk(layout, /*max_chunk_bytes=*/16,
               [&](const VariableLayout::Shard& shard, int64_t begin, int64_t end) {
                 chunks.emplace_back(shard.row_offset + begin, shard.row_offset + end);
               });
  EXPECT_EQ(chunks, (std::vector<std::pair<int64_t, int64_t>>{{0, 2}, {2, 3}, {3, 5}}));
  EXPECT_EQ(MaxRows(2, 16), 2);
  EXPECT_EQ(MaxRows(8, 16), 1);

  std::vector<int> shards;
  std::vector<std::vector<int64_t>> locals, positions;
  const std::vector<int64_t> ids = {4, 0, 3};
  ASSERT_TRUE(RouteRows(layout, ids, false,
                        [&](int shard, std::vector<int64_t> local, std::vector<int64_t> pos) {
                          shards.push_back(shard);
                          locals.push_back(std::move(local));
                          positions.push_back(std::move(pos));
                        })
                  .ok());
  EXPECT_EQ(shards, (std::vector<int>{0, 1}));
  EXPECT_EQ(locals[0], std::vector<int64_t>{0});
  EXPECT_EQ(locals[1], (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(positions[1], (std::vector<int64_t>{0, 2}));
  const std::vector<int64_t> bad = {5};
  EXPECT_TRUE(absl::StrContains(RouteRows(layout, bad, false, [](int, auto, auto) {}).message(),
                                "row id 5 at position 0 is out of range [0, 5)"));
  int calls = 0;
  ASSERT_TRUE(RouteRows(layout, {}, true, [&](int, auto, auto) { ++calls; }).ok());
  EXPECT_EQ(calls, 2);  // every shard, even without ids
}

TEST(VariableLayoutTest, DenseCallsNeedTheWholeVariable) {
  VariableLayout m = MakeLayout("m", {3, 2});
  EXPECT_TRUE(CheckDenseSize(m, "pull", 6).ok());
  EXPECT_TRUE(absl::StrContains(CheckDenseSize(m, "pull", 5).message(),
                                "variable \"m\": pull needs 6 floats (shape [3,2]), got 5"));
  VariableLayout t = MakeLayout("t", {0, 2});
  t.dynamic = true;
  EXPECT_TRUE(absl::StrContains(CheckDenseSize(t, "push", 0).message(), "is a dynamic table"));
}

}  // namespace
}  // namespace shardps
