#include "checkpoint/checkpoint_reader.h"

#include <unistd.h>

#include <cstring>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/safetensors.h"
#include "common/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

// Random bit patterns: NaNs with payloads, denormals and -0 included, so that any
// conversion on the way would show.
std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> out(n);
  for (float& f : out) {
    const uint32_t bits = rng();
    std::memcpy(&f, &bits, sizeof(f));
  }
  return out;
}

// n == 0 first: data() of an empty vector may be null, which memcmp must not get.
bool SameBits(const float* a, const float* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n * sizeof(float)) == 0;
}

struct VariableDef {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::string> slots;
  // Rows of each shard and the ps (file) holding it.
  std::vector<std::pair<int64_t, int>> shards;
};

// A checkpoint written by this test's own code: two ps files, an embedding split 2 ways
// across them, a 1-D bias on ps 1 and a scalar on ps 0; full values kept for comparison.
class CheckpointReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = MakeTestDir("reader");
    absl::StatusOr<CheckpointDir> dir = CheckpointDir::Open(root_ + "/job", true);
    ASSERT_TRUE(dir.ok()) << dir.status();
    dir_ = std::make_unique<CheckpointDir>(*dir);
    defs_ = {{"emb", {10, 3}, {"adam_m", "adam_v"}, {{6, 0}, {4, 1}}},
             {"dense/bias", {3}, {"momentum"}, {{3, 1}}},
             {"step", {}, {}, {{1, 0}}}};
    ASSERT_TRUE(Write(1).ok());
  }

  static int64_t Width(const VariableDef& d) {
    int64_t w = 1;
    for (size_t i = 1; i < d.shape.size(); ++i) w *= d.shape[i];
    return w;
  }
  static int64_t Rows(const VariableDef& d) { return d.shape.empty() ? 1 : d.shape[0]; }

  absl::Status Write(int64_t id) {
    absl::StatusOr<std::string> path = dir_->Prepare(id);
    if (!path.ok()) return path.status();
    Manifest m;
    m.checkpoint_id = id;
    m.job_id = "job-abc";
    m.generation = 3;
    m.progress.steps_done = 420;
    std::vector<std::vector<TensorToWrite>> files(2);
    uint32_t seed = 100;
    for (const VariableDef& d : defs_) {
      ManifestVariable v;
      v.name = d.name;
      v.shape = d.shape;
      v.slots = d.slots;
      v.optimizer.set_type(OptimizerSpec::ADAM);
      std::vector<std::string> slots = {""};
      slots.insert(slots.end(), d.slots.begin(), d.slots.end());
      for (const std::string& slot : slots) {
        values_[{d.name, slot}] = std::make_shared<std::vector<float>>(
            RandomFloats(static_cast<size_t>(Rows(d) * Width(d)), seed++));
      }
      int64_t offset = 0;
      for (size_t part = 0; part < d.shards.size(); ++part) {
        const auto [rows, ps] = d.shards[part];
        ManifestShard s;
        s.name = d.shards.size() == 1 ? d.name : absl::StrCat(d.name, "/part_", part);
        s.part = static_cast<int32_t>(part);
        s.num_parts = static_cast<int32_t>(d.shards.size());
        s.row_offset = offset;
        s.rows = rows;
        s.ps = ps;
        s.version = 420;
        s.file = CheckpointDir::DataFileName(ps, 2);
        for (const std::string& slot : slots) {
          TensorToWrite t;
          t.name = slot.empty() ? s.name : absl::StrCat(s.name, "/", slot);
          t.shape = d.shape;
          if (!t.shape.empty()) t.shape[0] = rows;
          const auto& all = values_[{d.name, slot}];
          for (int64_t r = offset; r < offset + rows; ++r) {  // a piece per row
            t.pieces.emplace_back(reinterpret_cast<const char*>(all->data() + r * Width(d)),
                                  static_cast<size_t>(Width(d)) * sizeof(float));
          }
          t.holds.push_back(all);
          s.tensors[slot] = t.name;
          files[ps].push_back(std::move(t));
        }
        v.shards.push_back(s);
        offset += rows;
      }
      m.variables.push_back(v);
    }
    for (int ps = 0; ps < 2; ++ps) {
      absl::StatusOr<DataFileInfo> info = WriteSafetensors(
          *path + "/" + CheckpointDir::DataFileName(ps, 2), std::move(files[ps]));
      if (!info.ok()) return info.status();
      m.files.push_back(*info);
    }
    return dir_->Commit(m);
  }

  std::unique_ptr<CheckpointReader> Open() {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(dir_->path());
    EXPECT_TRUE(reader.ok()) << reader.status();
    return reader.ok() ? *std::move(reader) : nullptr;
  }

  const std::vector<float>& Values(const std::string& variable, const std::string& slot) {
    return *values_.at({variable, slot});
  }

  std::string DataFile(int64_t id, int ps) const {
    return dir_->CheckpointPath(id) + "/" + CheckpointDir::DataFileName(ps, 2);
  }

  // Flips one byte of `tensor`'s data in ps file `ps` of checkpoint `id`.
  void Corrupt(int64_t id, int ps, const std::string& tensor, int64_t byte) {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(DataFile(id, ps));
    ASSERT_TRUE(file.ok());
    const TensorInfo* t = (*file)->Find(tensor);
    ASSERT_NE(t, nullptr);
    const int64_t at = (*file)->data_offset() + t->data_begin() + byte;
    std::string bytes = ReadFileBytes(DataFile(id, ps));
    bytes[at] ^= 0x10;
    WriteFileBytes(DataFile(id, ps), bytes);
  }

  std::string root_;
  std::unique_ptr<CheckpointDir> dir_;
  std::vector<VariableDef> defs_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<std::vector<float>>> values_;
};

TEST_F(CheckpointReaderTest, OpensByManifestCheckpointOrDirectory) {
  ASSERT_TRUE(Write(2).ok());
  const std::string newest = dir_->CheckpointPath(2) + "/manifest.json";
  for (const std::string& path :
       {dir_->path(), dir_->CheckpointPath(2), newest}) {
    absl::StatusOr<std::unique_ptr<CheckpointReader>> reader = CheckpointReader::Open(path);
    ASSERT_TRUE(reader.ok()) << path << ": " << reader.status();
    EXPECT_EQ((*reader)->manifest_path(), newest) << path;
    EXPECT_EQ((*reader)->manifest().checkpoint_id, 2);
  }
  absl::StatusOr<std::unique_ptr<CheckpointReader>> older =
      CheckpointReader::Open(dir_->CheckpointPath(1));
  ASSERT_TRUE(older.ok());
  EXPECT_EQ((*older)->manifest().checkpoint_id, 1);

  EXPECT_EQ(CheckpointReader::Open(root_ + "/nope").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(dir_->Prepare(3).ok());  // interrupted: no manifest, not a checkpoint directory
  absl::StatusOr<std::unique_ptr<CheckpointReader>> interrupted =
      CheckpointReader::Open(dir_->CheckpointPath(3));
  EXPECT_EQ(interrupted.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(interrupted.status().message(), HasSubstr("neither a manifest.json"));
}

TEST_F(CheckpointReaderTest, ReadsAnyRowRangeBitForBit) {
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  for (const VariableDef& d : defs_) {
    std::vector<std::string> slots = {""};
    slots.insert(slots.end(), d.slots.begin(), d.slots.end());
    const int64_t width = Width(d);
    for (const std::string& slot : slots) {
      const std::vector<float>& all = Values(d.name, slot);
      for (int64_t begin = 0; begin <= Rows(d); ++begin) {
        for (int64_t end = begin; end <= Rows(d); ++end) {
          SCOPED_TRACE(absl::StrCat(d.name, " '", slot, "' rows [", begin, ", ", end, ")"));
          std::vector<float> out(static_cast<size_t>((end - begin) * width), 0.0f);
          int64_t bytes_read = 0;
          ASSERT_TRUE(reader->ReadRows(d.name, slot, begin, end, absl::MakeSpan(out), &bytes_read)
                          .ok());
          EXPECT_TRUE(SameBits(out.data(), all.data() + begin * width, out.size()));
          // Each source tensor touched is read whole (for its checksum), no other.
          int64_t expected_bytes = 0, row = 0;
          for (const auto& [rows, ps] : d.shards) {
            if (std::max(begin, row) < std::min(end, row + rows)) {
              expected_bytes += rows * width * 4;
            }
            row += rows;
          }
          EXPECT_EQ(bytes_read, expected_bytes);
        }
      }
    }
  }
}

TEST_F(CheckpointReaderTest, SinkGetsConsecutiveWholeRowsWithGlobalRowNumbers) {
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  std::vector<int64_t> firsts;
  std::string bytes;
  ASSERT_TRUE(reader
                  ->ReadRows("emb", "adam_v", 4, 9,
                             [&](int64_t first_row, absl::string_view chunk) {
                               EXPECT_EQ(chunk.size() % 12, 0u);
                               EXPECT_EQ(first_row, 4 + static_cast<int64_t>(bytes.size()) / 12);
                               firsts.push_back(first_row);
                               bytes.append(chunk.data(), chunk.size());
                               return absl::OkStatus();
                             })
                  .ok());
  EXPECT_EQ(firsts, (std::vector<int64_t>{4, 6}));  // one chunk from each shard
  ASSERT_EQ(bytes.size(), 5u * 12);
  EXPECT_TRUE(SameBits(reinterpret_cast<const float*>(bytes.data()),
                       Values("emb", "adam_v").data() + 4 * 3, 15));
  // A sink's error stops the read.
  EXPECT_EQ(reader->ReadRows("emb", "", 0, 10,
                             [](int64_t, absl::string_view) {
                               return absl::ResourceExhaustedError("full");
                             })
                .code(),
            absl::StatusCode::kResourceExhausted);
}

// Rows spread over separate buffers, one per row, as a shard's blocks spread them.
struct RowBuffers {
  RowBuffers(int64_t rows, int64_t row_bytes)
      : row_bytes(row_bytes), rows(static_cast<size_t>(rows), std::string(row_bytes, '\0')) {}
  void Spans(int64_t first, int64_t last, int64_t begin, std::vector<absl::Span<char>>* spans) {
    calls.emplace_back(first, last);
    for (int64_t r = first; r < last; ++r) {
      std::string& row = rows[static_cast<size_t>(r - begin)];
      spans->emplace_back(row.data(), row.size());
    }
  }
  std::string Joined() const {
    std::string all;
    for (const std::string& r : rows) all += r;
    return all;
  }
  int64_t row_bytes;
  std::vector<std::string> rows;
  std::vector<std::pair<int64_t, int64_t>> calls;
};

TEST_F(CheckpointReaderTest, ReadRowsIntoFillsScatteredSpansAcrossSourceShards) {
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  // Same layout (one source shard's rows exactly) and re-sharded ranges (parts of one or two).
  for (const auto& [begin, end] :
       std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {6, 10}, {0, 10}, {4, 9}, {1, 3}, {7, 7}}) {
    for (const std::string slot : {"", "adam_m", "adam_v"}) {
      SCOPED_TRACE(absl::StrCat("'", slot, "' rows [", begin, ", ", end, ")"));
      RowBuffers out(end - begin, 12);
      int64_t bytes_read = 0;
      ASSERT_TRUE(reader
                      ->ReadRowsInto(
                          "emb", slot, begin, end,
                          [&, b = begin](int64_t first, int64_t last,
                                         std::vector<absl::Span<char>>* spans) {
                            out.Spans(first, last, b, spans);
                          },
                          &bytes_read)
                      .ok());
      const std::string joined = out.Joined();
      EXPECT_TRUE(SameBits(reinterpret_cast<const float*>(joined.data()),
                           Values("emb", slot).data() + begin * 3, joined.size() / 4));
      // Asked once per source shard, in row order; each touched source tensor read whole.
      std::vector<std::pair<int64_t, int64_t>> calls;
      int64_t expected_bytes = 0;
      if (begin < std::min<int64_t>(end, 6)) {
        calls.emplace_back(begin, std::min<int64_t>(end, 6));
        expected_bytes += 6 * 12;
      }
      if (std::max<int64_t>(begin, 6) < end) {
        calls.emplace_back(std::max<int64_t>(begin, 6), end);
        expected_bytes += 4 * 12;
      }
      EXPECT_EQ(out.calls, calls);
      EXPECT_EQ(bytes_read, expected_bytes);
    }
  }
  // A scalar and a 1-D variable.
  float step = 0;
  ASSERT_TRUE(reader->ReadRows("step", "", 0, 1, absl::MakeSpan(&step, 1)).ok());
  EXPECT_TRUE(SameBits(&step, Values("step", "").data(), 1));
}

TEST_F(CheckpointReaderTest, ReadRowsIntoRefusesSpansThatDoNotAddUp) {
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  std::string buffer(200, 'q');
  for (int64_t bytes : {0, 11, 13, 5 * 12}) {
    absl::Status s = reader->ReadRowsInto(
        "emb", "", 2, 6, [&](int64_t, int64_t, std::vector<absl::Span<char>>* spans) {
          spans->emplace_back(buffer.data(), static_cast<size_t>(bytes));
        });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bytes;
    EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("rows [2, 6) of variable 'emb' are 48 bytes, "
                                                    "the destination spans hold ", bytes)));
  }
  EXPECT_EQ(buffer, std::string(200, 'q'));
  EXPECT_EQ(reader->ReadRowsInto("emb", "", 0, 11,
                                 [](int64_t, int64_t, std::vector<absl::Span<char>>*) {})
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(reader->ReadRowsInto("emb", "momentum", 0, 1,
                                 [](int64_t, int64_t, std::vector<absl::Span<char>>*) {})
                .code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CheckpointReaderTest, ReadRowsIntoFindsAFlipOutsideTheRowsItKeeps) {
  // Row 9 of the second shard of adam_m; the reads below keep rows 6 and 7 only.
  Corrupt(1, 1, "emb/part_1/adam_m", 3 * 12 + 5);
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  RowBuffers out(2, 12);
  absl::Status s = reader->ReadRowsInto(
      "emb", "adam_m", 6, 8, [&](int64_t first, int64_t last, std::vector<absl::Span<char>>* spans) {
        out.Spans(first, last, 6, spans);
      });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(DataFile(1, 1) + ": tensor 'emb/part_1/adam_m': CRC-32C mismatch"));
  // The parameters of the same rows, and the slot's other shard, are fine.
  std::vector<float> rows(6);
  EXPECT_TRUE(reader->ReadRows("emb", "", 6, 8, absl::MakeSpan(rows)).ok());
  EXPECT_TRUE(SameBits(rows.data(), Values("emb", "").data() + 18, 6));
  EXPECT_TRUE(reader->ReadRows("emb", "adam_m", 4, 6, absl::MakeSpan(rows)).ok());
}

TEST_F(CheckpointReaderTest, TruncatedDataFileIsDataLossNamingIt) {
  const std::string file = DataFile(1, 1);
  std::string bytes = ReadFileBytes(file);
  bytes.resize(bytes.size() - 4);
  WriteFileBytes(file, bytes);
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  std::vector<float> out(12);
  absl::Status s = reader->ReadRows("emb", "", 6, 10, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(file));
  // The other file still reads.
  EXPECT_TRUE(reader->ReadRows("emb", "", 0, 4, absl::MakeSpan(out)).ok());
}

TEST_F(CheckpointReaderTest, BadRequestsNameWhatIsWrong) {
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  std::vector<float> out(3);
  absl::Status s = reader->ReadRows("nope", "", 0, 1, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("no variable 'nope'"));
  s = reader->ReadRows("emb", "momentum", 0, 1, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("variable 'emb' has no slot 'momentum' (it has [adam_m, adam_v])"));
  s = reader->ReadRows("emb", "", 9, 11, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("rows [9, 11) of variable 'emb', which has 10"));
  s = reader->ReadRows("emb", "", 0, 2, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("are 6 floats, the output holds 3"));
  EXPECT_EQ(reader->ReadRows("emb", "", 3, 2, absl::MakeSpan(out)).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CheckpointReaderTest, CorruptTensorFailsOnlyTheReadsThatTouchIt) {
  Corrupt(1, 1, "emb/part_1/adam_m", 17);
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  const std::string file = DataFile(1, 1);
  for (const auto& [begin, end] : std::vector<std::pair<int64_t, int64_t>>{{7, 8}, {5, 7}, {0, 10}, {9, 10}}) {
    std::vector<float> out(static_cast<size_t>((end - begin) * 3));
    absl::Status s = reader->ReadRows("emb", "adam_m", begin, end, absl::MakeSpan(out));
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << begin;
    EXPECT_THAT(s.message(), HasSubstr(file + ": tensor 'emb/part_1/adam_m': CRC-32C mismatch"));
  }
  // The other shard of that slot, the other tensors of the same file: fine.
  std::vector<float> out(18);
  EXPECT_TRUE(reader->ReadRows("emb", "adam_m", 0, 6, absl::MakeSpan(out)).ok());
  EXPECT_TRUE(SameBits(out.data(), Values("emb", "adam_m").data(), 18));
  std::vector<float> all(30);
  EXPECT_TRUE(reader->ReadRows("emb", "", 0, 10, absl::MakeSpan(all)).ok());
  EXPECT_TRUE(reader->ReadRows("emb", "adam_v", 0, 10, absl::MakeSpan(all)).ok());
  std::vector<float> bias(3);
  EXPECT_TRUE(reader->ReadRows("dense/bias", "momentum", 0, 3, absl::MakeSpan(bias)).ok());
  absl::Status verify = reader->VerifyFiles();
  EXPECT_EQ(verify.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(verify.message(), HasSubstr(file + ": CRC-32C mismatch"));
}

TEST_F(CheckpointReaderTest, ChangedHeaderFailsEveryReadOfThatFileOnly) {
  // A header edit that keeps the JSON valid and the offsets right (a renamed tensor) is
  // caught by the header's CRC against the manifest.
  std::string bytes = ReadFileBytes(DataFile(1, 0));
  const size_t at = bytes.find("\"step\"");
  ASSERT_NE(at, std::string::npos);
  bytes[at + 1] = 'S';
  WriteFileBytes(DataFile(1, 0), bytes);
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  std::vector<float> out(18);
  absl::Status s = reader->ReadRows("emb", "", 0, 6, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(DataFile(1, 0) + ": header CRC-32C mismatch"));
  EXPECT_TRUE(reader->ReadRows("emb", "", 6, 10, absl::MakeSpan(out).subspan(0, 12)).ok());
  EXPECT_EQ(reader->VerifyFiles().code(), absl::StatusCode::kDataLoss);
}

TEST_F(CheckpointReaderTest, ManyThreadsReadAtOnce) {
  std::unique_ptr<CheckpointReader> reader = Open();
  ASSERT_NE(reader, nullptr);
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 200; ++i) {
        const int64_t begin = rng() % 10, end = begin + rng() % (11 - begin);
        const std::string slot = (i % 3 == 0) ? "" : (i % 3 == 1 ? "adam_m" : "adam_v");
        std::vector<float> out(static_cast<size_t>((end - begin) * 3));
        if (!reader->ReadRows("emb", slot, begin, end, absl::MakeSpan(out)).ok() ||
            !SameBits(out.data(), Values("emb", slot).data() + begin * 3, out.size())) {
          ++failures[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures, (std::vector<int>{0, 0, 0, 0}));
}

TEST_F(CheckpointReaderTest, ExportWritesWholeVariablesByName) {
  const std::string out = root_ + "/model.safetensors";
  ASSERT_TRUE(ExportCheckpoint(dir_->path(), out, /*with_slots=*/true).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(out);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->metadata().at("job_id"), "job-abc");
  EXPECT_EQ((*file)->metadata().at("checkpoint_id"), "1");
  EXPECT_EQ((*file)->metadata().at("steps_done"), "420");
  std::vector<std::string> names;
  for (const TensorInfo& t : (*file)->tensors()) names.push_back(t.name());
  EXPECT_EQ(names, (std::vector<std::string>{"emb", "emb/adam_m", "emb/adam_v", "dense/bias",
                                             "dense/bias/momentum", "step"}));
  for (const auto& [key, values] : values_) {
    const std::string name = key.second.empty() ? key.first : key.first + "/" + key.second;
    const TensorInfo* t = (*file)->Find(name);
    ASSERT_NE(t, nullptr) << name;
    // A named copy for the lambda: capturing a structured binding is C++20 (clang 14 refuses).
    const std::string& variable = key.first;
    const VariableDef& d = *std::find_if(defs_.begin(), defs_.end(),
                                         [&](const VariableDef& x) { return x.name == variable; });
    EXPECT_EQ(std::vector<int64_t>(t->shape().begin(), t->shape().end()), d.shape) << name;
    std::vector<float> back(values->size());
    ASSERT_TRUE((*file)->ReadRange(*t, 0, back.size() * 4, reinterpret_cast<char*>(back.data())).ok());
    EXPECT_TRUE(SameBits(back.data(), values->data(), back.size())) << name;
  }
  EXPECT_FALSE(PathExists(out + ".unverified"));

  const std::string params_only = root_ + "/params.safetensors";
  ASSERT_TRUE(ExportCheckpoint(dir_->CheckpointPath(1), params_only, false).ok());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> params = SafetensorsFile::Open(params_only);
  ASSERT_TRUE(params.ok());
  EXPECT_EQ((*params)->tensors().size(), 3u);
  EXPECT_EQ((*params)->Find("emb/adam_m"), nullptr);
}

TEST_F(CheckpointReaderTest, ExportOfACorruptCheckpointLeavesNothing) {
  Corrupt(1, 0, "emb/part_0/adam_v", 0);
  const std::string out = root_ + "/model.safetensors";
  absl::Status s = ExportCheckpoint(dir_->path(), out, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(DataFile(1, 0) + ": tensor 'emb/part_0/adam_v'"));
  EXPECT_FALSE(PathExists(out));
  EXPECT_FALSE(PathExists(out + ".unverified"));
  // Without slots the corrupt tensor is not needed.
  EXPECT_TRUE(ExportCheckpoint(dir_->path(), out, false).ok());
}

}  // namespace
}  // namespace shardps
