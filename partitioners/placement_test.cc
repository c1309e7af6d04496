#include "partitioners/placement.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "partitioners/partitioner.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int> PlaceAll(Placer& placer, const std::vector<int64_t>& bytes) {
  std::vector<int> ps;
  for (int64_t b : bytes) ps.push_back(placer.Place(b));
  return ps;
}

TEST(PlacementTest, RoundRobinCounterRunsAcrossVariables) {
  std::unique_ptr<Placer> placer = *NewRoundRobinPlacer(2);
  // Variable a: 3 shards over 2 ps.
  EXPECT_THAT(PlaceAll(*placer, {10, 10, 10}), ElementsAre(0, 1, 0));
  // Variable b, unsplit, continues the counter as ParameterServerStrategy's does.
  EXPECT_EQ(placer->Place(1000), 1);
  EXPECT_EQ(placer->Place(1), 0);
  EXPECT_EQ(placer->DebugString(), "RoundRobinPlacer(num_ps=2, placed=5)");
}

TEST(PlacementTest, RoundRobinIgnoresSizes) {
  std::unique_ptr<Placer> placer = *NewRoundRobinPlacer(3);
  EXPECT_THAT(PlaceAll(*placer, {1 << 30, 1, 1, 1 << 30, 0, -5, 7}),
              ElementsAre(0, 1, 2, 0, 1, 2, 0));
}

TEST(PlacementTest, ByBytesBalancesAnEmbeddingTable) {
  // A big embedding in 3 shards, then small dense variables: the small ones fill the ps the
  // big shards left lightest, where round robin would pile onto ps 0.
  std::unique_ptr<Placer> placer = *NewByBytesPlacer(2);
  EXPECT_THAT(PlaceAll(*placer, {400, 400, 400}), ElementsAre(0, 1, 0));
  EXPECT_THAT(PlaceAll(*placer, {100, 100, 100, 100, 100}), ElementsAre(1, 1, 1, 1, 0));
  EXPECT_EQ(placer->DebugString(), "ByBytesPlacer(num_ps=2, bytes=[900,800])");
}

TEST(PlacementTest, ByBytesTiesGoToTheLowestIndex) {
  std::unique_ptr<Placer> placer = *NewByBytesPlacer(3);
  EXPECT_THAT(PlaceAll(*placer, {0, 0, 0, 5, 5, 5, 1}), ElementsAre(0, 0, 0, 0, 1, 2, 0));
  // Negative sizes count as zero, and huge ones saturate instead of wrapping.
  std::unique_ptr<Placer> other = *NewByBytesPlacer(2);
  EXPECT_THAT(PlaceAll(*other, {-100, INT64_MAX, INT64_MAX, 1}), ElementsAre(0, 0, 1, 0));
}

TEST(PlacementTest, WorksWithSlicesFromAPartitioner) {
  std::unique_ptr<Partitioner> partitioner = *NewMaxSizePartitioner(1 << 20);
  const std::vector<int64_t> shape = {100000, 16};  // 6.4 MB of float32 -> 7 shards.
  const int n = *partitioner->NumShards(shape, DataType::kFloat32);
  ASSERT_EQ(n, 7);
  std::unique_ptr<Placer> placer = *NewByBytesPlacer(3);
  std::vector<int> ps;
  const std::vector<ShardSlice> slices = *SliceVariable("emb", shape, n);
  for (const ShardSlice& slice : slices) {
    ps.push_back(placer->Place(*TensorBytes(slice.shape, DataType::kFloat32)));
  }
  // Shards 0-4 hold 14286 rows, 5-6 hold 14285: after six, ps 2 is the lightest.
  EXPECT_THAT(ps, ElementsAre(0, 1, 2, 0, 1, 2, 2));
}

TEST(PlacementTest, ParsePlacement) {
  std::unique_ptr<Placer> rr = *ParsePlacement("round_robin", 4);
  EXPECT_EQ(rr->DebugString(), "RoundRobinPlacer(num_ps=4, placed=0)");
  std::unique_ptr<Placer> bb = *ParsePlacement("by_bytes", 2);
  EXPECT_EQ(bb->DebugString(), "ByBytesPlacer(num_ps=2, bytes=[0,0])");
}

TEST(PlacementTest, InvalidArguments) {
  for (int num_ps : {0, -1}) {
    absl::Status status = NewRoundRobinPlacer(num_ps).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("num_ps must be >= 1"));
    status = NewByBytesPlacer(num_ps).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(status.message()), HasSubstr("num_ps must be >= 1"));
    status = ParsePlacement("by_bytes", num_ps).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  }
  absl::Status status = ParsePlacement("random", 2).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("placement \"random\" is unknown"));
  EXPECT_EQ(ParsePlacement("", 2).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace shardps
