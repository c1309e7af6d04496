#include "partitioners/partitioner.h"

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Partitioner> Fixed(int n) { return *NewFixedShardsPartitioner(n); }
std::unique_ptr<Partitioner> MinSize(int64_t min_bytes, int max_shards,
                                     int64_t bytes_per_string = 16) {
  return *NewMinSizePartitioner(min_bytes, max_shards, bytes_per_string);
}
std::unique_ptr<Partitioner> MaxSize(int64_t max_bytes, int max_shards = 0,
                                     int64_t bytes_per_string = 16) {
  return *NewMaxSizePartitioner(max_bytes, max_shards, bytes_per_string);
}

int Shards(const Partitioner& p, std::vector<int64_t> shape,
           DataType dtype = DataType::kFloat32) {
  absl::StatusOr<int> n = p.NumShards(shape, dtype);
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *n : -1;
}

void ExpectInvalid(const absl::Status& status, const std::string& substring) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr(substring));
}

// The examples in TensorFlow's docstrings of tf.distribute.experimental.partitioners.
TEST(PartitionerTest, TensorFlowDocumentedExamples) {
  EXPECT_EQ(Shards(*MinSize(4, 2), {6, 1}), 2);
  EXPECT_EQ(Shards(*MinSize(4, 10), {6, 1}), 6);
  EXPECT_EQ(Shards(*MaxSize(4), {6, 1}), 6);
  EXPECT_EQ(Shards(*MaxSize(4, 2), {6, 1}), 2);
  EXPECT_EQ(Shards(*MaxSize(1024), {6, 1}), 1);
  EXPECT_EQ(Shards(*Fixed(2), {10, 3}), 2);
}

TEST(PartitionerTest, FixedShardsIsCappedByRows) {
  EXPECT_EQ(Shards(*Fixed(3), {2, 4}), 2);
  EXPECT_EQ(Shards(*Fixed(3), {7, 4}), 3);
  EXPECT_EQ(Shards(*Fixed(1), {7}), 1);
}

TEST(PartitionerTest, MinSizeDefaultsAreOneShard) {
  std::unique_ptr<Partitioner> p = *NewMinSizePartitioner();
  EXPECT_EQ(Shards(*p, {1000, 100}), 1);  // 400000 bytes, but max_shards defaults to 1.
  EXPECT_EQ(p->DebugString(),
            "MinSizePartitioner(min_shard_bytes=262144, max_shards=1, bytes_per_string=16)");
}

TEST(PartitionerTest, MinSizeRoundsUp) {
  // 400000 bytes / 262144 = 1.53 -> 2 shards.
  EXPECT_EQ(Shards(*MinSize(262144, 8), {1000, 100}), 2);
  // Exactly 2 * 262144 bytes -> 2 shards, one byte more -> 3.
  EXPECT_EQ(Shards(*MinSize(262144, 8), {2 * 65536}), 2);
  EXPECT_EQ(Shards(*MinSize(262144, 8), {2 * 262144 + 1}, DataType::kUInt8), 3);
  // Tiny variables still get one shard.
  EXPECT_EQ(Shards(*MinSize(262144, 8), {1, 1}), 1);
}

TEST(PartitionerTest, MaxSizeMatchesTensorFlowArithmetic) {
  // Row of 3 float32 = 12 bytes; a 10-byte cap still holds one row per shard.
  EXPECT_EQ(Shards(*MaxSize(10), {7, 3}), 7);
  // 25 bytes hold 2 rows -> ceil(7 / 2) = 4 shards.
  EXPECT_EQ(Shards(*MaxSize(25), {7, 3}), 4);
  // Embedding [1e6, 64] float32, 1 MiB shards: 4096 rows each -> ceil(244.14) = 245.
  EXPECT_EQ(Shards(*MaxSize(1 << 20), {1000000, 64}), 245);
  EXPECT_EQ(Shards(*MaxSize(1 << 20, 100), {1000000, 64}), 100);
  EXPECT_EQ(Shards(*MaxSize(1 << 20), {1000000, 64}, DataType::kFloat64), 489);
}

TEST(PartitionerTest, StringsCountBytesPerString) {
  // 6 strings: 96 bytes at 16 per string, 192 at 32.
  EXPECT_EQ(Shards(*MinSize(64, 10), {6, 1}, DataType::kString), 2);
  EXPECT_EQ(Shards(*MinSize(64, 10, 32), {6, 1}, DataType::kString), 3);
  EXPECT_EQ(Shards(*MaxSize(32), {6, 1}, DataType::kString), 3);
  EXPECT_EQ(Shards(*MaxSize(32, 0, 8), {6, 1}, DataType::kString), 2);
}

TEST(PartitionerTest, DtypeSizesMatter) {
  EXPECT_EQ(Shards(*MinSize(8, 100), {8}, DataType::kInt8), 1);
  EXPECT_EQ(Shards(*MinSize(8, 100), {8}, DataType::kFloat16), 2);
  EXPECT_EQ(Shards(*MinSize(8, 100), {8}, DataType::kInt32), 4);
  EXPECT_EQ(Shards(*MinSize(8, 100), {8}, DataType::kInt64), 8);
}

TEST(PartitionerTest, ScalarGetsOneShard) {
  EXPECT_EQ(Shards(*Fixed(4), {}), 1);
  EXPECT_EQ(Shards(*MinSize(1, 10), {}), 1);
  EXPECT_EQ(Shards(*MaxSize(1), {}), 1);
}

TEST(PartitionerTest, InvalidConstructorArguments) {
  ExpectInvalid(NewFixedShardsPartitioner(0).status(), "num_shards must be >= 1, got 0");
  ExpectInvalid(NewFixedShardsPartitioner(-2).status(), "num_shards");
  ExpectInvalid(NewMinSizePartitioner(0).status(), "min_shard_bytes");
  ExpectInvalid(NewMinSizePartitioner(-5).status(), "min_shard_bytes");
  ExpectInvalid(NewMinSizePartitioner(4, 0).status(), "max_shards");
  ExpectInvalid(NewMinSizePartitioner(4, 2, 0).status(), "bytes_per_string");
  ExpectInvalid(NewMaxSizePartitioner(0).status(), "max_shard_bytes");
  ExpectInvalid(NewMaxSizePartitioner(-1).status(), "max_shard_bytes");
  ExpectInvalid(NewMaxSizePartitioner(4, -1).status(), "max_shards");
  ExpectInvalid(NewMaxSizePartitioner(4, 0, -3).status(), "bytes_per_string");
}

TEST(PartitionerTest, InvalidShapesAreErrorsForEveryPartitioner) {
  std::vector<std::unique_ptr<Partitioner>> all;
  all.push_back(Fixed(2));
  all.push_back(MinSize(4, 2));
  all.push_back(MaxSize(4));
  for (const auto& p : all) {
    SCOPED_TRACE(p->DebugString());
    ExpectInvalid(p->NumShards({0, 4}, DataType::kFloat32).status(),
                  "shape [0,4]: dim 0 is 0");
    ExpectInvalid(p->NumShards({4, 0}, DataType::kFloat32).status(), "dim 1 is 0");
    ExpectInvalid(p->NumShards({-3}, DataType::kFloat32).status(), "dim 0 is -3");
    ExpectInvalid(p->NumShards({4}, static_cast<DataType>(99)).status(),
                  "dtype 99 is not a known DataType");
  }
}

TEST(PartitionerTest, HugeShapesAreErrorsNotOverflows) {
  const int64_t big = int64_t{1} << 40;
  ExpectInvalid(MinSize(4, 2)->NumShards({big, big}, DataType::kFloat32).status(),
                "overflows int64");
  ExpectInvalid(MaxSize(4)->NumShards({big, 1}, DataType::kFloat32).status(),
                "set max_shards");
  EXPECT_EQ(Shards(*MaxSize(4, 16), {big, 1}), 16);
}

TEST(PartitionerTest, ParsePartitionerSpecs) {
  EXPECT_EQ((*ParsePartitioner("fixed:3"))->DebugString(), "FixedShardsPartitioner(num_shards=3)");
  EXPECT_EQ((*ParsePartitioner("min_size"))->DebugString(),
            "MinSizePartitioner(min_shard_bytes=262144, max_shards=1, bytes_per_string=16)");
  EXPECT_EQ((*ParsePartitioner("min_size:1024"))->DebugString(),
            "MinSizePartitioner(min_shard_bytes=1024, max_shards=1, bytes_per_string=16)");
  EXPECT_EQ((*ParsePartitioner("min_size:262144:4"))->DebugString(),
            "MinSizePartitioner(min_shard_bytes=262144, max_shards=4, bytes_per_string=16)");
  EXPECT_EQ((*ParsePartitioner("max_size:1048576"))->DebugString(),
            "MaxSizePartitioner(max_shard_bytes=1048576, max_shards=unset, bytes_per_string=16)");
  EXPECT_EQ((*ParsePartitioner("max_size:1048576:8"))->DebugString(),
            "MaxSizePartitioner(max_shard_bytes=1048576, max_shards=8, bytes_per_string=16)");
  EXPECT_EQ(Shards(**ParsePartitioner("max_size:4:2"), {6, 1}), 2);
}

// "ps" counts follow the number of ps (a job's layout across a scale-ps).
TEST(PartitionerTest, PsCountsAreTheNumberOfPs) {
  EXPECT_EQ((*ParsePartitioner("fixed:ps", 3))->DebugString(),
            "FixedShardsPartitioner(num_shards=3)");
  EXPECT_EQ((*ParsePartitioner("min_size:1024:ps", 2))->DebugString(),
            "MinSizePartitioner(min_shard_bytes=1024, max_shards=2, bytes_per_string=16)");
  EXPECT_EQ((*ParsePartitioner("max_size:4:ps", 5))->DebugString(),
            "MaxSizePartitioner(max_shard_bytes=4, max_shards=5, bytes_per_string=16)");
  EXPECT_EQ((*ParsePartitioner("fixed:4", 2))->DebugString(),
            "FixedShardsPartitioner(num_shards=4)");  // a number stays a number
  ExpectInvalid(ParsePartitioner("fixed:ps").status(), "num_shards \"ps\" needs the number");
  ExpectInvalid(ParsePartitioner("min_size:1:ps", 0).status(), "max_shards \"ps\"");
  ExpectInvalid(ParsePartitioner("min_size:ps", 2).status(), "min_shard_bytes \"ps\"");
}

TEST(PartitionerTest, ParsePartitionerErrorsNameThePart) {
  ExpectInvalid(ParsePartitioner("").status(), "unknown partitioner \"\"");
  ExpectInvalid(ParsePartitioner("variable_axis").status(),
                "unknown partitioner \"variable_axis\"");
  ExpectInvalid(ParsePartitioner("fixed").status(), "expected fixed:<num_shards>");
  ExpectInvalid(ParsePartitioner("fixed:1:2").status(), "expected fixed:<num_shards>");
  ExpectInvalid(ParsePartitioner("fixed:x").status(), "num_shards \"x\" is not an integer");
  ExpectInvalid(ParsePartitioner("fixed:-1").status(), "num_shards \"-1\"");
  ExpectInvalid(ParsePartitioner("fixed: 3").status(), "num_shards \" 3\"");
  ExpectInvalid(ParsePartitioner("fixed:0").status(),
                "partitioner spec \"fixed:0\": FixedShardsPartitioner: num_shards must be >= 1");
  ExpectInvalid(ParsePartitioner("fixed:99999999999").status(), "num_shards");
  ExpectInvalid(ParsePartitioner("min_size:").status(), "min_shard_bytes \"\"");
  ExpectInvalid(ParsePartitioner("min_size:1k").status(), "min_shard_bytes \"1k\"");
  ExpectInvalid(ParsePartitioner("min_size:0").status(), "min_shard_bytes must be >= 1");
  ExpectInvalid(ParsePartitioner("min_size:4:0").status(), "max_shards must be >= 1");
  ExpectInvalid(ParsePartitioner("min_size:4:z").status(), "max_shards \"z\"");
  ExpectInvalid(ParsePartitioner("min_size:1:2:3").status(), "expected min_size");
  ExpectInvalid(ParsePartitioner("max_size").status(), "max_shard_bytes is required");
  ExpectInvalid(ParsePartitioner("max_size:0").status(), "max_shard_bytes must be >= 1");
  ExpectInvalid(ParsePartitioner("max_size:1:2:3").status(), "expected max_size");
  ExpectInvalid(ParsePartitioner("max_size:99999999999999999999").status(),
                "max_shard_bytes");
  ExpectInvalid(ParsePartitioner("fixed:\n").status(), "\"fixed:\\n\"");  // One line.
}

TEST(SliceVariableTest, ExtraRowsGoToTheFirstShards) {
  absl::StatusOr<std::vector<ShardSlice>> slices = SliceVariable("emb", {13, 8}, 5);
  ASSERT_TRUE(slices.ok()) << slices.status();
  ASSERT_EQ(slices->size(), 5u);
  std::vector<int64_t> rows, offsets;
  for (int i = 0; i < 5; ++i) {
    const ShardSlice& s = (*slices)[i];
    EXPECT_EQ(s.name, "emb/part_" + std::to_string(i));
    EXPECT_EQ(s.part, i);
    EXPECT_EQ(s.num_parts, 5);
    EXPECT_EQ(s.shape.size(), 2u);
    EXPECT_EQ(s.shape[1], 8);
    rows.push_back(s.shape[0]);
    offsets.push_back(s.row_offset);
  }
  EXPECT_THAT(rows, ElementsAre(3, 3, 3, 2, 2));
  EXPECT_THAT(offsets, ElementsAre(0, 3, 6, 9, 11));
}

TEST(SliceVariableTest, TensorFlowCommentExample) {
  // ParameterServerStrategy: shape[0]=10 over 4 -> [3, 3, 2, 2], offsets [0, 3, 6, 8].
  std::vector<ShardSlice> slices = *SliceVariable("v", {10}, 4);
  EXPECT_THAT(slices[3].shape, ElementsAre(2));
  EXPECT_EQ(slices[3].row_offset, 8);
  EXPECT_EQ(slices[3].name, "v/part_3");
}

TEST(SliceVariableTest, OneShardKeepsThePlainName) {
  std::vector<ShardSlice> slices = *SliceVariable("dense/kernel", {6, 4}, 1);
  ASSERT_EQ(slices.size(), 1u);
  EXPECT_EQ(slices[0].name, "dense/kernel");
  EXPECT_EQ(slices[0].num_parts, 1);
  EXPECT_EQ(slices[0].row_offset, 0);
  EXPECT_THAT(slices[0].shape, ElementsAre(6, 4));

  std::vector<ShardSlice> scalar = *SliceVariable("step", {}, 1);
  ASSERT_EQ(scalar.size(), 1u);
  EXPECT_EQ(scalar[0].name, "step");
  EXPECT_TRUE(scalar[0].shape.empty());
}

TEST(SliceVariableTest, EveryRowOnceWhenSplitAsThePartitionerSays) {
  std::unique_ptr<Partitioner> p = MaxSize(100);
  for (int64_t rows : {1, 2, 7, 64, 99, 1000}) {
    const std::vector<int64_t> shape = {rows, 5};
    const int n = Shards(*p, shape);
    std::vector<ShardSlice> slices = *SliceVariable("w", shape, n);
    int64_t next = 0;
    for (const ShardSlice& s : slices) {
      EXPECT_EQ(s.row_offset, next);
      EXPECT_GE(s.shape[0], 1);
      next += s.shape[0];
    }
    EXPECT_EQ(next, rows);
  }
}

TEST(SliceVariableTest, InvalidArguments) {
  ExpectInvalid(SliceVariable("", {4}, 2).status(), "variable name is empty");
  ExpectInvalid(SliceVariable("v", {4}, 0).status(),
                "variable \"v\": num_shards must be >= 1, got 0");
  ExpectInvalid(SliceVariable("v", {4}, -1).status(), "num_shards must be >= 1");
  ExpectInvalid(SliceVariable("v", {}, 2).status(), "scalar (shape []) cannot be split");
  ExpectInvalid(SliceVariable("v", {0, 3}, 1).status(), "variable \"v\": shape [0,3]: dim 0");
  ExpectInvalid(SliceVariable("v", {3, -1}, 1).status(), "dim 1 is -1");
  ExpectInvalid(SliceVariable("v", {3, 2}, 4).status(), "num_shards 4 exceeds shape[0] 3");
}

TEST(DataTypeTest, SizesNamesAndBytes) {
  EXPECT_EQ(DataTypeSize(DataType::kFloat32), 4);
  EXPECT_EQ(DataTypeSize(DataType::kFloat64), 8);
  EXPECT_EQ(DataTypeSize(DataType::kInt32), 4);
  EXPECT_EQ(DataTypeSize(DataType::kInt64), 8);
  EXPECT_EQ(DataTypeSize(DataType::kBFloat16), 2);
  EXPECT_EQ(DataTypeSize(DataType::kString), 0);
  EXPECT_EQ(DataTypeName(DataType::kFloat32), "float32");
  EXPECT_EQ(*ParseDataType("float32"), DataType::kFloat32);
  EXPECT_EQ(*ParseDataType("float"), DataType::kFloat32);
  EXPECT_EQ(*ParseDataType("double"), DataType::kFloat64);
  EXPECT_EQ(*ParseDataType("string"), DataType::kString);
  ExpectInvalid(ParseDataType("float128").status(), "dtype \"float128\"");

  EXPECT_EQ(*TensorBytes({6, 1}, DataType::kFloat32), 24);
  EXPECT_EQ(*TensorBytes({}, DataType::kFloat64), 8);
  EXPECT_EQ(*TensorBytes({0, 3}, DataType::kFloat32), 0);
  EXPECT_EQ(*TensorBytes({3}, DataType::kString, 10), 30);
  ExpectInvalid(TensorBytes({-1}, DataType::kFloat32).status(), "dim 0 is negative");
  ExpectInvalid(TensorBytes({3}, DataType::kString, 0).status(), "bytes_per_string");
  ExpectInvalid(
      TensorBytes({std::numeric_limits<int64_t>::max(), 2}, DataType::kInt8).status(),
      "overflows int64");
}

}  // namespace
}  // namespace shardps
