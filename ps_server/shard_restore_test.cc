#include "ps_server/shard_restore.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "checkpoint/checkpoint_reader.h"
#include "checkpoint/manifest.h"
#include "checkpoint/safetensors.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kWidth = 2;

OptimizerSpec Momentum() {
  OptimizerSpec o;
  o.set_type(OptimizerSpec::MOMENTUM);
  o.set_learning_rate(0.1);
  o.set_momentum(0.9);
  return o;
}

// Rows [offset, offset + rows) of a variable "v" of 10 rows.
ShardSpec Spec(int64_t offset, int64_t rows, OptimizerSpec optimizer = Momentum(),
               int64_t width = kWidth) {
  ShardSpec s;
  s.set_name("v/part_x");
  s.set_variable("v");
  s.set_num_parts(3);
  s.set_row_offset(offset);
  s.mutable_shape()->add_dim(rows);
  s.mutable_shape()->add_dim(width);
  s.mutable_full_shape()->add_dim(10);
  s.mutable_full_shape()->add_dim(width);
  *s.mutable_optimizer() = optimizer;
  return s;
}

// Value of element c of row r of tensor `slot` ("" parameters) in the checkpoint.
float Value(int64_t r, int64_t c, int slot) { return 100.0f * slot + 10.0f * r + c; }

TensorToWrite Tensor(const std::string& name, int64_t first, int64_t rows, int slot,
                     int64_t width, std::vector<std::vector<float>>* keep) {
  keep->emplace_back();
  std::vector<float>& values = keep->back();
  for (int64_t r = first; r < first + rows; ++r) {
    for (int64_t c = 0; c < width; ++c) values.push_back(Value(r, c, slot));
  }
  TensorToWrite t;
  t.name = name;
  t.shape = {rows, width};
  t.pieces.emplace_back(reinterpret_cast<const char*>(values.data()),
                        values.size() * sizeof(float));
  return t;
}

// A checkpoint of "v" (10 rows) in two shards, rows [0, 4) at version 3 and [4, 10) at
// version 5, with a "momentum" slot; rows of `width` floats.
std::string WriteCheckpoint(int64_t width = kWidth) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / "shard_restore";
  fs::remove_all(dir);
  fs::create_directories(dir);
  Manifest manifest;
  manifest.checkpoint_id = 1;
  manifest.job_id = "j";
  manifest.job_json = "{}";
  ManifestVariable v;
  v.name = "v";
  v.shape = {10, width};
  v.slots = {"momentum"};
  v.optimizer = Momentum();
  const int64_t offsets[] = {0, 4}, rows[] = {4, 6}, versions[] = {3, 5};
  for (int i = 0; i < 2; ++i) {
    const std::string name = "v/part_" + std::to_string(i);
    const std::string file = "ps-" + std::to_string(i) + ".safetensors";
    std::vector<std::vector<float>> keep;
    keep.reserve(2);
    std::vector<TensorToWrite> tensors;
    tensors.push_back(Tensor(name, offsets[i], rows[i], 0, width, &keep));
    tensors.push_back(Tensor(name + "/momentum", offsets[i], rows[i], 1, width, &keep));
    SafetensorsWriteOptions options;
    options.fsync = false;
    auto info = WriteSafetensors((dir / file).string(), std::move(tensors), options);
    EXPECT_TRUE(info.ok()) << info.status();
    manifest.files.push_back(*info);
    ManifestShard shard;
    shard.name = name;
    shard.part = i;
    shard.num_parts = 2;
    shard.row_offset = offsets[i];
    shard.rows = rows[i];
    shard.version = versions[i];
    shard.file = file;
    shard.tensors = {{"", name}, {"momentum", name + "/momentum"}};
    v.shards.push_back(shard);
  }
  manifest.variables.push_back(v);
  const std::string path = (dir / "manifest.json").string();
  std::ofstream(path) << ManifestToJson(manifest);
  return path;
}

std::shared_ptr<Shard> MakeShard(const ShardSpec& spec) {
  auto shard = Shard::Create(spec, Geometry{spec.shape().dim(0), spec.shape().dim(1)}, 8);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return *shard;
}

TEST(ShardRestoreTest, ReadsItsRowsAcrossSourceShardsWithTheHighestVersion) {
  const std::string manifest = WriteCheckpoint();
  auto reader = CheckpointReader::Open(manifest);
  ASSERT_TRUE(reader.ok()) << reader.status();
  // Rows [2, 7): two rows from the first source shard, three from the second.
  auto shard = MakeShard(Spec(2, 5));
  ASSERT_TRUE(CheckRestorable((*reader)->manifest(), manifest, *shard, {"v", false}).ok());
  auto restored = ReadShardState(**reader, *shard, {"v", false});
  ASSERT_TRUE(restored.ok()) << restored.status();
  EXPECT_EQ(restored->version, 5);
  EXPECT_GT(restored->bytes_read, 0);
  for (int64_t r = 0; r < 5; ++r) {
    for (int64_t c = 0; c < kWidth; ++c) {
      EXPECT_EQ(restored->state.params.Row(r)[c], Value(2 + r, c, 0));
      EXPECT_EQ(restored->state.slots[0].Row(r)[c], Value(2 + r, c, 1));
    }
  }
  // Parameters only: the slot at its initial value, version 0.
  auto params_only = ReadShardState(**reader, *shard, {"v", true});
  ASSERT_TRUE(params_only.ok());
  EXPECT_EQ(params_only->version, 0);
  EXPECT_EQ(params_only->state.params.Row(4)[1], Value(6, 1, 0));
  EXPECT_EQ(params_only->state.slots[0].Row(4)[1], 0.0f);
  // Within one source shard: its version.
  auto inside = ReadShardState(**reader, *MakeShard(Spec(0, 3)), {"v", false});
  ASSERT_TRUE(inside.ok());
  EXPECT_EQ(inside->version, 3);
}

TEST(ShardRestoreTest, CheckRestorableNamesShardVariableAndCheckpoint) {
  const std::string manifest = WriteCheckpoint();
  auto reader = CheckpointReader::Open(manifest);
  ASSERT_TRUE(reader.ok());
  const Manifest& m = (*reader)->manifest();
  auto shard = MakeShard(Spec(0, 10));
  const absl::Status missing = CheckRestorable(m, manifest, *shard, {"w", false});
  EXPECT_EQ(missing.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(missing.message(), "'w'")) << missing;
  EXPECT_TRUE(absl::StrContains(missing.message(), manifest)) << missing;
  OptimizerSpec adam;
  adam.set_type(OptimizerSpec::ADAM);
  adam.set_learning_rate(0.1);
  auto adam_shard = MakeShard(Spec(0, 10, adam));
  const absl::Status slots = CheckRestorable(m, manifest, *adam_shard, {"v", false});
  EXPECT_EQ(slots.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(slots.message(), "'adam_m'")) << slots;
  EXPECT_TRUE(absl::StrContains(slots.message(), "[momentum]")) << slots;
  EXPECT_TRUE(CheckRestorable(m, manifest, *adam_shard, {"v", true}).ok());
}

TEST(ShardRestoreTest, InitialStateIsTheInitializersAtVersionZero) {
  ShardSpec spec = Spec(0, 3);
  spec.mutable_initializer()->set_type(InitializerSpec::CONSTANT);
  spec.mutable_initializer()->set_value(0.5);
  auto shard = MakeShard(spec);
  auto initial = InitialShardState(*shard);
  ASSERT_TRUE(initial.ok());
  EXPECT_EQ(initial->version, 0);
  EXPECT_EQ(initial->state.params.Row(2)[1], 0.5f);
  EXPECT_EQ(initial->state.slots[0].Row(2)[1], 0.0f);
}

// Rows of 256 KiB: four to a 1 MiB block, so that a shard's rows lie in several blocks and
// each source tensor lands in several destination runs.
constexpr int64_t kWideWidth = 64 << 10;

// Every float of `blocks` (rows of the shard starting at global row `offset`) against the
// checkpoint's values of tensor `slot`; the number that differ.
int64_t Mismatches(const ParamBlocks& blocks, int64_t offset, int slot) {
  int64_t bad = 0;
  for (int64_t r = 0; r < blocks.rows(); ++r) {
    for (int64_t c = 0; c < blocks.width(); ++c) {
      bad += blocks.Row(r)[c] != Value(offset + r, c, slot);
    }
  }
  return bad;
}

TEST(ShardRestoreTest, ReadsStraightIntoManyBlocksTheSameOnAnyNumberOfThreads) {
  const std::string manifest = WriteCheckpoint(kWideWidth);
  auto reader = CheckpointReader::Open(manifest);
  ASSERT_TRUE(reader.ok()) << reader.status();
  // The source's own layout, and others: inside one source shard, across both, all rows.
  for (const auto& [offset, rows] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {4, 6}, {1, 2}, {2, 7}, {0, 10}}) {
    auto shard = MakeShard(Spec(offset, rows, Momentum(), kWideWidth));
    for (int threads : {1, 2, 3, 8}) {
      SCOPED_TRACE(testing::Message() << "rows [" << offset << ", " << offset + rows << "), "
                                      << threads << " threads");
      auto restored = ReadShardState(**reader, *shard, {"v", false}, threads);
      ASSERT_TRUE(restored.ok()) << restored.status();
      ASSERT_GT(restored->state.params.num_blocks(), rows > 4 ? 1 : 0);
      EXPECT_EQ(Mismatches(restored->state.params, offset, 0), 0);
      EXPECT_EQ(Mismatches(restored->state.slots[0], offset, 1), 0);
      // Every source tensor touched is read whole, once.
      const bool first = offset < 4, second = offset + rows > 4;
      EXPECT_EQ(restored->bytes_read, 2 * (first * 4 + second * 6) * kWideWidth * 4);
      EXPECT_EQ(restored->version, second ? 5 : 3);
    }
  }
}

// Flips one byte of row `row` (global) of tensor `name` in the file `file` next to `manifest`.
void FlipByte(const std::string& manifest, const std::string& file, const std::string& name,
              int64_t row_in_tensor, int64_t width) {
  const std::string path = (fs::path(manifest).parent_path() / file).string();
  auto st = SafetensorsFile::Open(path);
  ASSERT_TRUE(st.ok()) << st.status();
  const TensorInfo* t = (*st)->Find(name);
  ASSERT_NE(t, nullptr);
  const int64_t at = (*st)->data_offset() + t->data_begin() + row_in_tensor * width * 4 + 1;
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(at);
  char c = 0;
  f.read(&c, 1);
  c ^= 0x20;
  f.seekp(at);
  f.write(&c, 1);
}

TEST(ShardRestoreTest, AFlipOutsideTheShardsRowsIsDataLossNamingTheFirstBadTensor) {
  const std::string manifest = WriteCheckpoint(kWideWidth);
  // Source rows 9 of the slot (ps-1) and 0 of the parameters (ps-0): a shard of rows
  // [2, 7) reads neither row, but both tensors whole.
  FlipByte(manifest, "ps-1.safetensors", "v/part_1/momentum", 5, kWideWidth);
  auto reader = CheckpointReader::Open(manifest);
  ASSERT_TRUE(reader.ok());
  auto shard = MakeShard(Spec(2, 5, Momentum(), kWideWidth));
  for (int threads : {1, 4}) {
    auto restored = ReadShardState(**reader, *shard, {"v", false}, threads);
    ASSERT_FALSE(restored.ok());
    EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(restored.status().message(),
                                  "ps-1.safetensors: tensor 'v/part_1/momentum': CRC-32C mismatch"))
        << restored.status();
    EXPECT_TRUE(absl::StrContains(restored.status().message(), "slot 'momentum' rows [4, 7)"))
        << restored.status();
  }
  // With a second bad tensor that comes earlier (the first source shard's parameters), the
  // error is that one's, however many threads read.
  FlipByte(manifest, "ps-0.safetensors", "v/part_0", 0, kWideWidth);
  auto reopened = CheckpointReader::Open(manifest);
  ASSERT_TRUE(reopened.ok());
  for (int threads : {1, 2, 4, 8}) {
    auto restored = ReadShardState(**reopened, *shard, {"v", false}, threads);
    ASSERT_FALSE(restored.ok());
    EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_TRUE(absl::StrContains(restored.status().message(),
                                  "ps-0.safetensors: tensor 'v/part_0': CRC-32C mismatch"))
        << threads << ": " << restored.status();
  }
  // Parameters only never read the bad slot, but the bad parameters still fail.
  EXPECT_EQ(ReadShardState(**reopened, *shard, {"v", true}, 4).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(ShardRestoreTest, ATruncatedFileIsDataLossNamingIt) {
  const std::string manifest = WriteCheckpoint(kWideWidth);
  const fs::path file = fs::path(manifest).parent_path() / "ps-1.safetensors";
  fs::resize_file(file, fs::file_size(file) - 8);
  auto reader = CheckpointReader::Open(manifest);
  ASSERT_TRUE(reader.ok());
  auto restored = ReadShardState(**reader, *MakeShard(Spec(2, 5, Momentum(), kWideWidth)),
                                 {"v", false}, 4);
  ASSERT_FALSE(restored.ok());
  EXPECT_EQ(restored.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(restored.status().message(), file.string()))
      << restored.status();
  // Rows that the truncated file does not hold still restore.
  EXPECT_TRUE(ReadShardState(**reader, *MakeShard(Spec(0, 4, Momentum(), kWideWidth)),
                             {"v", false}, 4)
                  .ok());
}

}  // namespace
}  // namespace shardps
