#include "data/ctr/ctr_binary.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/test_files.h"
#include "data/ctr/ctr_hash.h"
#include "data/ctr/synthetic_ctr.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

constexpr char kSpec[] =
    "synthetic_ctr:examples=300,dense=3,vocab=1000|20|100000,hot=1|1..3|2,missing=0.2,seed=4";

std::unique_ptr<SyntheticCtrSource> Source() {
  auto source = SyntheticCtrSource::FromSpec(kSpec);
  EXPECT_TRUE(source.ok()) << source.status();
  return *std::move(source);
}

std::string Written(const std::string& name) {
  const std::string path = MakeTestDir("ctrbin") + "/" + name;
  EXPECT_TRUE(WriteCtrBinary(*Source(), 0, 300, path, kSpec).ok());
  return path;
}

TEST(CtrBinaryTest, RoundTripEqualsTheSource) {
  auto source = Source();
  const std::string path = Written("a.ctrbin");
  auto binary = CtrBinarySource::Open(path);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ((*binary)->num_examples(), 300);
  EXPECT_EQ((*binary)->schema(), source->schema());
  EXPECT_EQ((*binary)->description(), kSpec);
  CtrBatch expected;
  CtrBatch got;
  ASSERT_TRUE(ReadRange(*source, 0, 300, &expected).ok());
  ASSERT_TRUE(ReadRange(**binary, 0, 300, &got).ok());
  EXPECT_EQ(got, expected);
  // Random access in any order.
  const std::vector<int64_t> indices = {299, 0, 17, 17, 150};
  ASSERT_TRUE(source->Read(indices, &expected).ok());
  ASSERT_TRUE((*binary)->Read(indices, &got).ok());
  EXPECT_EQ(got, expected);
  const absl::Status bad = (*binary)->Read(std::vector<int64_t>{300}, &got);
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  // No temporary files are left beside it.
  EXPECT_FALSE(PathExists(path + ".tmp"));
}

TEST(CtrBinaryTest, EmptyFileRoundTrips) {
  const std::string path = MakeTestDir("ctrbin") + "/empty.ctrbin";
  ASSERT_TRUE(WriteCtrBinary(*Source(), 5, 5, path, "").ok());
  auto binary = CtrBinarySource::Open(path);
  ASSERT_TRUE(binary.ok()) << binary.status();
  EXPECT_EQ((*binary)->num_examples(), 0);
}

void ExpectOpenDataLoss(const std::string& path, const std::string& fragment) {
  auto binary = CtrBinarySource::Open(path);
  ASSERT_FALSE(binary.ok()) << fragment;
  EXPECT_EQ(binary.status().code(), absl::StatusCode::kDataLoss) << binary.status();
  EXPECT_NE(binary.status().message().find(path), std::string::npos) << binary.status();
  EXPECT_NE(binary.status().message().find(fragment), std::string::npos) << binary.status();
}

TEST(CtrBinaryTest, TruncatedAndCorruptFilesAreRejected) {
  const std::string path = Written("c.ctrbin");
  const std::string bytes = ReadFileBytes(path);
  const std::string dir = MakeTestDir("corrupt");

  WriteFileBytes(dir + "/trunc", bytes.substr(0, bytes.size() - 5));
  ExpectOpenDataLoss(dir + "/trunc", "truncated");
  WriteFileBytes(dir + "/tiny", bytes.substr(0, 20));
  ExpectOpenDataLoss(dir + "/tiny", "bytes");
  std::string magic = bytes;
  magic[0] = 'X';
  WriteFileBytes(dir + "/magic", magic);
  ExpectOpenDataLoss(dir + "/magic", "magic");
  std::string header = bytes;
  header[70] ^= 1;  // inside the schema
  WriteFileBytes(dir + "/header", header);
  ExpectOpenDataLoss(dir + "/header", "header checksum");
  std::string index = bytes;
  index[bytes.size() - 16] ^= 1;
  WriteFileBytes(dir + "/index", index);
  ExpectOpenDataLoss(dir + "/index", "index checksum");

  // A flipped bit in a record opens (the header and index are intact) but that record's
  // read is DATA_LOSS naming the file and example.
  auto good = CtrBinarySource::Open(path);
  ASSERT_TRUE(good.ok());
  std::string record = bytes;
  const size_t records_offset = static_cast<unsigned char>(bytes[24]) |
                                (static_cast<unsigned char>(bytes[25]) << 8);
  record[records_offset + 9] ^= 0x10;  // example 0's first dense value
  WriteFileBytes(dir + "/record", record);
  auto corrupt = CtrBinarySource::Open(dir + "/record");
  ASSERT_TRUE(corrupt.ok()) << corrupt.status();
  CtrBatch batch;
  EXPECT_TRUE((*corrupt)->Read(std::vector<int64_t>{1, 2}, &batch).ok());
  const absl::Status status = (*corrupt)->Read(std::vector<int64_t>{1, 0}, &batch);
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("example 0"), std::string::npos) << status;
  EXPECT_NE(status.message().find(dir + "/record"), std::string::npos) << status;

  // A newer version is refused as such (version is outside the header checksum's reach only
  // if the checksum matches, so recompute nothing: the version check comes first).
  std::string newer = bytes;
  newer[8] = 2;
  WriteFileBytes(dir + "/newer", newer);
  auto v2 = CtrBinarySource::Open(dir + "/newer");
  EXPECT_EQ(v2.status().code(), absl::StatusCode::kFailedPrecondition) << v2.status();

  EXPECT_EQ(CtrBinarySource::Open(dir + "/absent").status().code(),
            absl::StatusCode::kNotFound);
}

// A header (with a right checksum) whose schema is larger than its records: Read sized its
// batch by num_dense before reading a record, so 2^31 - 1 dense values made it allocate 8 GiB
// per example (fuzz/ctr_binary_fuzzer; its regression case regression_num_dense).
TEST(CtrBinaryTest, ASchemaLargerThanTheRecordsIsRejected) {
  const std::string bytes = ReadFileBytes(Written("big.ctrbin"));
  std::string header = bytes;
  const uint32_t num_dense = 0x7fffffff;
  std::memcpy(&header[64], &num_dense, 4);
  uint32_t header_size;
  std::memcpy(&header_size, &header[12], 4);
  std::memset(&header[56], 0, 8);
  const uint64_t checksum = Checksum64(header.data(), header_size);
  std::memcpy(&header[56], &checksum, 8);
  const std::string path = MakeTestDir("big") + "/dense";
  WriteFileBytes(path, header);
  ExpectOpenDataLoss(path, "exceeds the records");
}

// Without dense features a read took &dense[0] of an empty vector (UBSan: a reference to
// null; fuzz/ctr_binary_fuzzer's regression case regression_no_dense).
TEST(CtrBinaryTest, NoDenseFeaturesRoundTrips) {
  CtrSchema schema;
  schema.features = {{"C1", 0, 2}};
  CtrBatch batch;
  batch.Reset(schema, 2);
  for (int i = 0; i < 2; ++i) {
    batch.BeginExample(static_cast<float>(i), nullptr, 0);
    batch.AddId(0, 40 + i);
    batch.EndExample();
  }
  const std::string path = MakeTestDir("nodense") + "/a.ctrbin";
  auto writer = CtrBinaryWriter::Create(path, schema, "");
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE((*writer)->Append(batch).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  auto binary = CtrBinarySource::Open(path);
  ASSERT_TRUE(binary.ok()) << binary.status();
  CtrBatch got;
  ASSERT_TRUE((*binary)->Read(std::vector<int64_t>{0, 1}, &got).ok());
  EXPECT_EQ(got, batch);
}

TEST(CtrBinaryTest, WriterRejectsBatchesThatDoNotFitTheSchema) {
  auto source = Source();
  const std::string path = MakeTestDir("ctrbin") + "/w.ctrbin";
  auto writer = CtrBinaryWriter::Create(path, source->schema(), "");
  ASSERT_TRUE(writer.ok()) << writer.status();
  CtrBatch batch;
  ASSERT_TRUE(ReadRange(*source, 0, 10, &batch).ok());
  batch.features[0].ids[0] = 5000;  // vocab 1000
  EXPECT_EQ((*writer)->Append(batch).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*writer)->num_examples(), 0);
  writer->reset();  // abandoned: nothing at path
  EXPECT_FALSE(PathExists(path));
}

}  // namespace
}  // namespace shardps
