#include "checkpoint/safetensors.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "checkpoint/crc32c.h"
#include "common/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

// A safetensors file from a raw header text (not padded) and data section.
std::string RawFile(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

TensorToWrite Tensor(std::string name, std::string dtype, std::vector<int64_t> shape,
                     const std::string& bytes, size_t piece_size) {
  TensorToWrite t;
  t.name = std::move(name);
  t.dtype = std::move(dtype);
  t.shape = std::move(shape);
  auto owned = std::make_shared<std::string>(bytes);
  for (size_t at = 0; at < owned->size(); at += piece_size) {
    t.pieces.emplace_back(owned->data() + at, std::min(piece_size, owned->size() - at));
  }
  t.holds.push_back(owned);
  return t;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTestDir("safetensors"); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

struct Expected {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::string bytes;
};

TEST_F(SafetensorsTest, RoundTripsDtypesScalarsAndEmptyTensors) {
  std::vector<Expected> expected = {
      {"dense/kernel", "F32", {3, 5}, RandomBytes(60, 1)},
      {"step", "I64", {}, RandomBytes(8, 2)},
      {"empty_rows", "F32", {0, 7}, ""},
      {"scale", "F64", {}, RandomBytes(8, 3)},
      {"ids", "I32", {4}, RandomBytes(16, 4)},
      {"mask", "U8", {3, 1}, RandomBytes(3, 5)},
      {"nothing", "BF16", {2, 0, 3}, ""},
      {"half", "F16", {2, 2}, RandomBytes(8, 6)},
  };
  std::vector<TensorToWrite> tensors;
  for (const Expected& e : expected) tensors.push_back(Tensor(e.name, e.dtype, e.shape, e.bytes, 7));
  SafetensorsWriteOptions options;
  options.metadata = {{"job_id", "j-1"}, {"note", "quote \" and newline \n"}};
  SafetensorsWriteStats stats;
  const std::string path = Path("a.safetensors");
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors), options, &stats);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_FALSE(PathExists(path + ".tmp"));
  EXPECT_EQ(info->file(), "a.safetensors");
  const std::string raw = ReadFileBytes(path);
  EXPECT_EQ(info->bytes(), static_cast<int64_t>(raw.size()));
  EXPECT_EQ(stats.bytes, info->bytes());
  EXPECT_GE(stats.seconds, 0);
  EXPECT_EQ(info->crc32c(), Crc32c(raw));
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(static_cast<unsigned char>(raw[i])) << (8 * i);
  EXPECT_EQ((8 + n) % 8, 0u) << "the data section must start 8-aligned";
  EXPECT_EQ(raw[8], '{');
  EXPECT_EQ(info->header_crc32c(), Crc32c(absl::string_view(raw.data(), 8 + n)));

  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ((*file)->header_crc32c(), info->header_crc32c());
  EXPECT_EQ((*file)->file_bytes(), info->bytes());
  EXPECT_EQ((*file)->metadata(), options.metadata);
  ASSERT_EQ((*file)->tensors().size(), expected.size());
  ASSERT_EQ(info->tensors_size(), static_cast<int>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const Expected& e = expected[i];
    const TensorInfo& got = (*file)->tensors()[i];
    const TensorInfo& written = info->tensors(static_cast<int>(i));
    SCOPED_TRACE(e.name);
    EXPECT_EQ(got.name(), e.name);
    EXPECT_EQ(got.dtype(), e.dtype);
    EXPECT_EQ(std::vector<int64_t>(got.shape().begin(), got.shape().end()), e.shape);
    EXPECT_EQ(got.data_begin(), written.data_begin());
    EXPECT_EQ(got.data_end(), written.data_end());
    EXPECT_EQ(got.data_end() - got.data_begin(), static_cast<int64_t>(e.bytes.size()));
    EXPECT_EQ(written.crc32c(), Crc32c(e.bytes));
    EXPECT_EQ((*file)->Find(e.name), &got);
    std::string back(e.bytes.size(), '\0');
    ASSERT_TRUE((*file)->ReadRange(got, 0, back.size(), back.data()).ok());
    EXPECT_EQ(back, e.bytes);
    std::string streamed;
    ASSERT_TRUE((*file)
                    ->StreamTensor(got, written.crc32c(),
                                   [&](int64_t offset, absl::string_view bytes) {
                                     EXPECT_EQ(offset, static_cast<int64_t>(streamed.size()));
                                     streamed.append(bytes.data(), bytes.size());
                                     return absl::OkStatus();
                                   })
                    .ok());
    EXPECT_EQ(streamed, e.bytes);
  }
  EXPECT_EQ((*file)->Find("missing"), nullptr);
  EXPECT_TRUE((*file)->Verify(info->bytes(), info->crc32c()).ok());
}

TEST_F(SafetensorsTest, LargeTensorsInManyPiecesCrossBatches) {
  // 3000 pieces of 3001 bytes: more pieces and bytes than one pwritev batch takes.
  const std::string a = RandomBytes(3000 * 3001 + 3, 7);  // 3 bytes short of whole floats
  const std::string a_bytes = a.substr(0, 3000 * 3001 / 4 * 4);
  const std::string b = RandomBytes(5 << 20, 8);
  std::vector<TensorToWrite> tensors;
  tensors.push_back(Tensor("a", "F32", {static_cast<int64_t>(a_bytes.size() / 4)}, a_bytes, 3001));
  tensors.push_back(Tensor("b", "U8", {5, 1 << 20}, b, 5 << 20));
  const std::string path = Path("big.safetensors");
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->tensors(0).crc32c(), Crc32c(a_bytes));
  EXPECT_EQ(info->tensors(1).crc32c(), Crc32c(b));
  EXPECT_EQ(info->crc32c(), Crc32c(ReadFileBytes(path)));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  // Chunks of whole 12-byte rows when asked for them.
  std::string streamed;
  ASSERT_TRUE((*file)
                  ->StreamTensor(
                      *(*file)->Find("a"), info->tensors(0).crc32c(),
                      [&](int64_t offset, absl::string_view bytes) {
                        EXPECT_EQ(offset % 12, 0);
                        EXPECT_TRUE(bytes.size() % 12 == 0 ||
                                    offset + bytes.size() == a_bytes.size());
                        streamed.append(bytes.data(), bytes.size());
                        return absl::OkStatus();
                      },
                      12)
                  .ok());
  EXPECT_EQ(streamed, a_bytes);
}

TEST_F(SafetensorsTest, DropsEachTensorsHoldsOnceItIsWritten) {
  // Each hold's deleter records how far the temporary file had been written when it ran.
  const std::string path = Path("holds.safetensors");
  const int64_t tensor_bytes = 8 << 20;
  std::vector<int64_t> written_at_drop(3, -1);
  std::vector<TensorToWrite> tensors;
  auto data = std::make_shared<std::string>(RandomBytes(tensor_bytes, 9));
  for (int i = 0; i < 3; ++i) {
    TensorToWrite t;
    t.name = absl::StrCat("t", i);
    t.dtype = "U8";
    t.shape = {tensor_bytes};
    t.pieces.emplace_back(*data);
    int64_t* slot = &written_at_drop[i];
    const std::string temp = path + ".tmp";
    t.holds.push_back(std::shared_ptr<const void>(data.get(), [slot, temp](const void*) {
      struct stat st;
      *slot = ::stat(temp.c_str(), &st) == 0 ? st.st_size : -2;
    }));
    tensors.push_back(std::move(t));
  }
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors));
  ASSERT_TRUE(info.ok()) << info.status();
  const int64_t data_start = info->bytes() - 3 * tensor_bytes;
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    EXPECT_GE(written_at_drop[i], data_start + (i + 1) * tensor_bytes);
  }
  EXPECT_LT(written_at_drop[0], info->bytes()) << "tensor 0's holds were kept to the end";
}

TEST_F(SafetensorsTest, RejectsBadTensorsBeforeWriting) {
  const std::string path = Path("bad.safetensors");
  auto expect_invalid = [&](TensorToWrite t, const std::string& what) {
    std::vector<TensorToWrite> tensors;
    tensors.push_back(std::move(t));
    absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors));
    EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(info.status().message(), HasSubstr(what));
    EXPECT_THAT(info.status().message(), HasSubstr(path));
    EXPECT_FALSE(PathExists(path));
    EXPECT_FALSE(PathExists(path + ".tmp"));
  };
  expect_invalid(Tensor("w", "F32", {2, 2}, RandomBytes(12, 1), 4), "pieces hold 12");
  expect_invalid(Tensor("w", "Q7", {2}, RandomBytes(8, 1), 4), "unknown dtype 'Q7'");
  expect_invalid(Tensor("w", "F32", {-1}, "", 4), "invalid shape [-1]");
  expect_invalid(Tensor("__metadata__", "F32", {}, RandomBytes(4, 1), 4), "not a valid");
  expect_invalid(Tensor("bad\xff", "F32", {}, RandomBytes(4, 1), 4), "UTF-8");

  std::vector<TensorToWrite> twice;
  twice.push_back(Tensor("w", "F32", {1}, RandomBytes(4, 1), 4));
  twice.push_back(Tensor("w", "F32", {1}, RandomBytes(4, 1), 4));
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(twice));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("'w': written twice"));
}

TEST_F(SafetensorsTest, MissingDirectoryNamesPathAndErrno) {
  const std::string path = Path("no/such/dir/x.safetensors");
  std::vector<TensorToWrite> tensors;
  tensors.push_back(Tensor("w", "F32", {1}, RandomBytes(4, 1), 4));
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(info.status().message(), HasSubstr(path + ".tmp"));
  EXPECT_THAT(info.status().message(), HasSubstr("No such file or directory"));
}

TEST_F(SafetensorsTest, FailedWriteRemovesTheTemporaryFile) {
  // A file size limit makes a write fail midway (EFBIG), as a full disk would (ENOSPC).
  const std::string path = Path("limited.safetensors");
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  struct rlimit limit = old_limit;
  limit.rlim_cur = 1 << 20;
  auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::vector<TensorToWrite> tensors;
  tensors.push_back(Tensor("w", "U8", {6 << 20}, RandomBytes(6 << 20, 1), 1 << 20));
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors));
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  ::signal(SIGXFSZ, old_handler);
  ASSERT_FALSE(info.ok());
  EXPECT_THAT(info.status().message(), HasSubstr(path + ".tmp"));
  EXPECT_THAT(info.status().message(), HasSubstr("File too large"));
  EXPECT_FALSE(PathExists(path));
  EXPECT_FALSE(PathExists(path + ".tmp"));
}

TEST_F(SafetensorsTest, ReadsTensorsInOffsetOrderWhateverTheKeyOrder) {
  const std::string path = Path("order.safetensors");
  WriteFileBytes(path, RawFile(R"({"b":{"dtype":"U8","shape":[2],"data_offsets":[3,5]},)"
                         R"("a":{"dtype":"U8","shape":[3],"data_offsets":[0,3]}})",
                         "abcde"));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ((*file)->tensors().size(), 2u);
  EXPECT_EQ((*file)->tensors()[0].name(), "a");
  EXPECT_EQ((*file)->tensors()[1].name(), "b");
  char out[2];
  ASSERT_TRUE((*file)->ReadRange(*(*file)->Find("b"), 0, 2, out).ok());
  EXPECT_EQ(std::string(out, 2), "de");
  EXPECT_EQ((*file)->ReadRange(*(*file)->Find("b"), 1, 3, out).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*file)->ReadRange(*(*file)->Find("b"), 2, 1, out).code(),
            absl::StatusCode::kInvalidArgument);
}

struct Malformed {
  const char* label;
  std::string bytes;
  const char* message;  // expected in the error besides the path
};

TEST_F(SafetensorsTest, MalformedFilesAreDataLossNamingFileAndTensor) {
  const std::string w4 = R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]})";
  std::string huge_length(8, '\0');
  huge_length[7] = '\x10';
  const std::vector<Malformed> cases = {
      {"empty file", "", "fewer than the 8-byte header length"},
      {"short length", std::string("\x05\x00\x00", 3), "fewer than the 8-byte"},
      {"length past the file", huge_length + "{}", "runs past the end of the file"},
      {"length past the file by one", RawFile("{}", "").substr(0, 9), "runs past the end"},
      {"not JSON", RawFile("{\"w\":", ""), "invalid JSON"},
      {"trailing garbage", RawFile("{} x", ""), "invalid JSON"},
      {"not an object", RawFile("[1,2]", ""), "does not start with '{'"},
      {"unknown dtype",
       RawFile(R"({"w":{"dtype":"F31","shape":[1],"data_offsets":[0,4]}})", "abcd"),
       "tensor 'w': unknown dtype 'F31'"},
      {"dtype not a string",
       RawFile(R"({"w":{"dtype":4,"shape":[1],"data_offsets":[0,4]}})", "abcd"),
       "tensor 'w': dtype"},
      {"shape and bytes disagree",
       RawFile(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "abcd"),
       "tensor 'w': shape [2] of F32 needs 8 bytes"},
      {"negative dimension",
       RawFile(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", "abcd"),
       "tensor 'w': shape: -1"},
      {"fractional dimension",
       RawFile(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", "abcd"),
       "tensor 'w': shape: 1.5"},
      {"negative offset",
       RawFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", "abcd"),
       "tensor 'w': data_offsets [-4,0]"},
      {"end before begin",
       RawFile(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", "abcd"),
       "tensor 'w': data_offsets [4,0]: end before begin"},
      {"one offset", RawFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", "abcd"),
       "tensor 'w': data_offsets"},
      {"overlap",
       RawFile("{" + w4 + R"(,"v":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
               "abcdef"),
       "tensor 'v': data_offsets [2, 6) overlap tensor 'w'"},
      {"gap",
       RawFile("{" + w4 + R"(,"v":{"dtype":"U8","shape":[2],"data_offsets":[6,8]}})",
               "abcdefgh"),
       "tensor 'v': gap: bytes [4, 6)"},
      {"first tensor not at 0",
       RawFile(R"({"v":{"dtype":"U8","shape":[2],"data_offsets":[2,4]}})", "abcd"),
       "tensor 'v': gap: bytes [0, 2)"},
      {"truncated data", RawFile("{" + w4 + "}", "abc"), "truncated: the tensors need 4 bytes"},
      {"trailing data", RawFile("{" + w4 + "}", "abcdef"), "2 bytes after the last tensor"},
      {"duplicate tensor",
       RawFile("{" + w4 + R"(,"w":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})", "abcd"),
       "key 'w' appears twice"},
      {"duplicate field",
       RawFile(R"({"w":{"dtype":"F32","dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               "abcd"),
       "key 'dtype' appears twice"},
      {"unknown field",
       RawFile(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", "abcd"),
       "tensor 'w': unknown field 'x'"},
      {"metadata not strings", RawFile(R"({"__metadata__":{"a":1}})", ""),
       "__metadata__.a is not a string"},
      {"entry not an object", RawFile(R"({"w":[1]})", ""), "tensor 'w': entry is not"},
  };
  for (const Malformed& c : cases) {
    SCOPED_TRACE(c.label);
    const std::string path = Path("malformed.safetensors");
    WriteFileBytes(path, c.bytes);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
    ASSERT_FALSE(file.ok());
    EXPECT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << file.status();
    EXPECT_THAT(file.status().message(), HasSubstr(path));
    EXPECT_THAT(file.status().message(), HasSubstr(c.message));
  }
}

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(Path("nope"));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(file.status().message(), HasSubstr(Path("nope")));
}

TEST_F(SafetensorsTest, EveryFlippedByteIsDetected) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back(Tensor("layer/kernel", "F32", {4, 8}, RandomBytes(128, 11), 50));
  tensors.push_back(Tensor("layer/bias", "F32", {8}, RandomBytes(32, 12), 32));
  tensors.push_back(Tensor("step", "I64", {}, RandomBytes(8, 13), 8));
  const std::string path = Path("flip.safetensors");
  SafetensorsWriteOptions options;
  options.metadata = {{"k", "v"}};
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors), options);
  ASSERT_TRUE(info.ok()) << info.status();
  const std::string good = ReadFileBytes(path);
  int header_positions = 0, data_positions = 0;
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (unsigned char mask : {0x01, 0x80, 0xFF}) {
      std::string bad = good;
      bad[pos] = static_cast<char>(bad[pos] ^ mask);
      WriteFileBytes(path, bad);
      absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
      if (!file.ok()) {
        ASSERT_EQ(file.status().code(), absl::StatusCode::kDataLoss) << "at " << pos;
        ++header_positions;
        continue;
      }
      ASSERT_EQ((*file)->Verify(info->bytes(), info->crc32c()).code(),
                absl::StatusCode::kDataLoss)
          << "at " << pos;
      if ((*file)->header_crc32c() != info->header_crc32c()) {
        ++header_positions;
        continue;
      }
      // The header is intact: the flip is in some tensor's data, which its CRC must catch.
      int failures = 0;
      for (const TensorInfo& t : info->tensors()) {
        absl::Status s = (*file)->StreamTensor(
            t, t.crc32c(), [](int64_t, absl::string_view) { return absl::OkStatus(); });
        if (!s.ok()) {
          ++failures;
          EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
          EXPECT_THAT(s.message(), HasSubstr(path));
          EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("tensor '", t.name(), "'")));
        }
      }
      ASSERT_EQ(failures, 1) << "flip at " << pos << " mask " << int{mask};
      ++data_positions;
    }
  }
  EXPECT_EQ(data_positions, 3 * (128 + 32 + 8));
  EXPECT_EQ(header_positions + data_positions, static_cast<int>(3 * good.size()));
}

TEST_F(SafetensorsTest, StreamTensorStopsAtTheCallbacksError) {
  std::vector<TensorToWrite> tensors;
  tensors.push_back(Tensor("w", "U8", {10 << 20}, RandomBytes(10 << 20, 14), 1 << 20));
  const std::string path = Path("stop.safetensors");
  absl::StatusOr<DataFileInfo> info = WriteSafetensors(path, std::move(tensors));
  ASSERT_TRUE(info.ok()) << info.status();
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path);
  ASSERT_TRUE(file.ok());
  int calls = 0;
  absl::Status s = (*file)->StreamTensor(info->tensors(0), info->tensors(0).crc32c(),
                                         [&](int64_t, absl::string_view) {
                                           ++calls;
                                           return absl::CancelledError("enough");
                                         });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
  // A tensor that lies outside the file is refused, not read.
  TensorInfo outside = info->tensors(0);
  outside.set_data_end(outside.data_end() + 1);
  EXPECT_EQ((*file)->StreamTensor(outside, 0, [](int64_t, absl::string_view) {
                      return absl::OkStatus();
                    }).code(),
            absl::StatusCode::kInvalidArgument);
}

// A file of one 9 MiB + 5 byte tensor "w" between two others (more than two read chunks).
class ReadTensorIntoTest : public SafetensorsTest {
 protected:
  void SetUp() override {
    SafetensorsTest::SetUp();
    bytes_ = RandomBytes((9 << 20) + 5, 15);
    std::vector<TensorToWrite> tensors;
    tensors.push_back(Tensor("before", "U8", {3}, "abc", 3));
    tensors.push_back(Tensor("w", "U8", {static_cast<int64_t>(bytes_.size())}, bytes_, 1 << 20));
    tensors.push_back(Tensor("after", "U8", {2}, "yz", 2));
    path_ = Path("into.safetensors");
    absl::StatusOr<DataFileInfo> info = WriteSafetensors(path_, std::move(tensors));
    ASSERT_TRUE(info.ok()) << info.status();
    info_ = *info;
  }
  const TensorInfo& W() const { return info_.tensors(1); }
  std::string bytes_, path_;
  DataFileInfo info_;
};

TEST_F(ReadTensorIntoTest, ReadsStraightIntoScatteredTargetsSkippingNullOnes) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  // [0, 7) dropped, [7, 5 MiB) into one buffer, 1 MiB dropped, the rest into another buffer
  // in two pieces (one of them empty).
  const int64_t size = static_cast<int64_t>(bytes_.size());
  const int64_t a_end = 5 << 20, b_begin = 6 << 20;
  std::string a(static_cast<size_t>(a_end - 7), '\0');
  std::string b(static_cast<size_t>(size - b_begin), '\0');
  const std::vector<TensorReadTarget> targets = {
      {nullptr, 7},
      {a.data(), static_cast<int64_t>(a.size())},
      {nullptr, b_begin - a_end},
      {b.data(), 10},
      {b.data() + 10, 0},
      {b.data() + 10, static_cast<int64_t>(b.size()) - 10}};
  ASSERT_TRUE((*file)->ReadTensorInto(W(), W().crc32c(), targets).ok());
  EXPECT_EQ(a, bytes_.substr(7, a.size()));
  EXPECT_EQ(b, bytes_.substr(static_cast<size_t>(b_begin)));
  // All of it into one buffer.
  std::string whole(bytes_.size(), '\0');
  ASSERT_TRUE(
      (*file)->ReadTensorInto(W(), W().crc32c(), {{whole.data(), size}}).ok());
  EXPECT_EQ(whole, bytes_);
  // All of it dropped: still read and checked.
  EXPECT_TRUE((*file)->ReadTensorInto(W(), W().crc32c(), {{nullptr, size}}).ok());
  EXPECT_EQ((*file)->ReadTensorInto(W(), W().crc32c() ^ 1, {{nullptr, size}}).code(),
            absl::StatusCode::kDataLoss);
}

TEST_F(ReadTensorIntoTest, TargetsThatDoNotAddUpAreRefusedUnread) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok());
  const int64_t size = static_cast<int64_t>(bytes_.size());
  std::string out(bytes_.size() + 1, 'q');
  for (const std::vector<TensorReadTarget>& targets :
       std::vector<std::vector<TensorReadTarget>>{{{out.data(), size - 1}},
                                                  {{out.data(), size + 1}},
                                                  {{out.data(), size + 1}, {nullptr, -1}},
                                                  {}}) {
    absl::Status s = (*file)->ReadTensorInto(W(), W().crc32c(), targets);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), HasSubstr(path_ + ": tensor 'w'"));
  }
  EXPECT_EQ(out, std::string(bytes_.size() + 1, 'q'));  // nothing was read
}

TEST_F(ReadTensorIntoTest, FlippedByteIsDataLossNamingFileAndTensor) {
  const int64_t at = [&] {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> f = SafetensorsFile::Open(path_);
    return (*f)->data_offset() + W().data_begin() + (7 << 20) + 3;
  }();
  std::string bad = ReadFileBytes(path_);
  bad[static_cast<size_t>(at)] ^= 0x04;
  WriteFileBytes(path_, bad);
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok());
  std::string out(bytes_.size(), '\0');
  absl::Status s = (*file)->ReadTensorInto(
      W(), W().crc32c(), {{out.data(), static_cast<int64_t>(out.size())}});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path_ + ": tensor 'w': CRC-32C mismatch"));
  // A flip in bytes that go nowhere is caught all the same.
  s = (*file)->ReadTensorInto(W(), W().crc32c(),
                              {{out.data(), 7 << 20},
                               {nullptr, static_cast<int64_t>(out.size()) - (7 << 20)}});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path_ + ": tensor 'w': CRC-32C mismatch"));
  // The other tensors of the file are fine.
  char before[3];
  EXPECT_TRUE((*file)->ReadTensorInto(info_.tensors(0), info_.tensors(0).crc32c(),
                                      {{before, 3}}).ok());
  EXPECT_EQ(std::string(before, 3), "abc");
}

TEST_F(ReadTensorIntoTest, FileTruncatedAfterOpenIsDataLoss) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok());
  ASSERT_EQ(::truncate(path_.c_str(), (*file)->data_offset() + W().data_begin() + (8 << 20)), 0);
  std::string out(bytes_.size(), '\0');
  absl::Status s = (*file)->ReadTensorInto(
      W(), W().crc32c(), {{out.data(), static_cast<int64_t>(out.size())}});
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr(path_ + ": truncated"));
  // Reopened, the header no longer fits the file.
  EXPECT_EQ(SafetensorsFile::Open(path_).status().code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace shardps
