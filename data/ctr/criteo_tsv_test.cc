#include "data/ctr/criteo_tsv.h"

#include <string>
#include <vector>

#include "common/test_files.h"
#include "data/ctr/ctr_binary.h"
#include "data/ctr/synthetic_ctr.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

constexpr char kSpec[] =
    "synthetic_ctr:examples=400,dense=13,vocab=1000|20|100000,hot=1|1..3|2,missing=0.2,seed=8";

std::unique_ptr<SyntheticCtrSource> Source(const std::string& spec = kSpec) {
  auto source = SyntheticCtrSource::FromSpec(spec);
  EXPECT_TRUE(source.ok()) << source.status();
  return *std::move(source);
}

// Reads the whole file in batches of 64 and concatenates them by re-reading all at once.
absl::StatusOr<CtrBatch> ReadAll(const std::string& path, const CriteoTsvOptions& options,
                                 int64_t* bad_lines = nullptr) {
  auto reader = CriteoTsvReader::Open(path, options);
  if (!reader.ok()) return reader.status();
  CtrBatch all;
  absl::Status status = (*reader)->ReadBatch(1 << 30 >> 10, &all);  // one big batch
  if (!status.ok()) return status;
  if (bad_lines != nullptr) *bad_lines = (*reader)->bad_lines();
  return all;
}

TEST(CriteoTsvTest, RoundTripPlainAndGzipGivesTheSameBatches) {
  auto source = Source();
  CtrBatch expected;
  ASSERT_TRUE(ReadRange(*source, 0, 400, &expected).ok());
  const std::string dir = MakeTestDir("tsv");
  CriteoTsvOptions options;
  options.schema = source->schema();
  for (const std::string name : {"a.tsv", "a.tsv.gz"}) {
    const std::string path = dir + "/" + name;
    ASSERT_TRUE(WriteCriteoTsv(*source, 0, 400, path).ok());
    auto got = ReadAll(path, options);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, expected) << name;
    // In batches of 64 too.
    auto reader = CriteoTsvReader::Open(path, options);
    ASSERT_TRUE(reader.ok());
    CtrBatch batch;
    int64_t total = 0;
    for (;;) {
      ASSERT_TRUE((*reader)->ReadBatch(64, &batch).ok());
      if (batch.size == 0) break;
      EXPECT_EQ(batch.labels[0], expected.labels[total]);
      total += batch.size;
    }
    EXPECT_EQ(total, 400);
    EXPECT_EQ((*reader)->lines_read(), 400);
  }
  // The gzip file is compressed, the plain one is not.
  const std::string plain = ReadFileBytes(dir + "/a.tsv");
  const std::string gz = ReadFileBytes(dir + "/a.tsv.gz");
  EXPECT_EQ(plain.substr(0, 2) == "\x1f\x8b", false);
  EXPECT_EQ(gz.substr(0, 2), "\x1f\x8b");
  EXPECT_LT(gz.size(), plain.size());
  // 1 label + 13 dense + 3 categorical fields.
  const std::string first = plain.substr(0, plain.find('\n'));
  EXPECT_EQ(std::count(first.begin(), first.end(), '\t'), 16);
}

TEST(CriteoTsvTest, ParsesCriteoLinesWithMissingFieldsAndHexIds) {
  const std::string dir = MakeTestDir("tsv");
  const std::string path = dir + "/c.tsv";
  // label, 2 dense, 3 categorical (one multi-hot), CRLF and no final newline.
  WriteFileBytes(path,
                 "1\t0\t-3\t68fd1e64\t\tFFFFFFFFFFFFFFFF\r\n"
                 "0\t\t7\t0\t80e26c9b,1\t5\n"
                 "0\t1\t2\t\t\t");
  CriteoTsvOptions options;
  options.schema = CriteoSchema(2, 3, 2);
  auto batch = ReadAll(path, options);
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_EQ(batch->size, 3);
  EXPECT_EQ(batch->labels, (std::vector<float>{1, 0, 0}));
  EXPECT_EQ(batch->dense[0], 0.0f);
  EXPECT_EQ(batch->dense[1], 0.0f);  // negative -> 0
  EXPECT_EQ(batch->dense[2], 0.0f);  // missing -> 0
  EXPECT_EQ(batch->dense[3], CriteoDenseValue(7));
  EXPECT_EQ(batch->features[0].ids, (std::vector<int64_t>{0x68fd1e64, 0}));
  EXPECT_EQ(batch->features[1].ids, (std::vector<int64_t>{0x80e26c9b, 1}));
  EXPECT_EQ(batch->features[1].offsets, (std::vector<int64_t>{0, 0, 2, 2}));
  EXPECT_EQ(batch->features[2].ids, (std::vector<int64_t>{-1, 5}));
}

TEST(CriteoTsvTest, EachKindOfBadLineNamesFileLineAndField) {
  const std::string dir = MakeTestDir("tsv");
  const std::string good = "1\t5\t6\taa\tbb";
  struct Case {
    std::string line;
    std::string fragment;
  } cases[] = {
      {"1\t5\t6\taa", "4 fields, expected 5"},
      {"2\t5\t6\taa\tbb", "field 1 (label): label \"2\""},
      {"\t5\t6\taa\tbb", "field 1 (label)"},
      {"1\t5x\t6\taa\tbb", "field 2 (I1): \"5x\" is not an integer"},
      {"1\t5\t6\tzz\tbb", "field 4 (C1): \"zz\" is not hex"},
      {"1\t5\t6\t12345678901234567\tbb", "field 4 (C1)"},
      {"1\t5\t6\taa\tbb,cc", "field 5 (C2): 2 ids, max_hotness is 1"},
      {"1\t5\t6\taa\tbb,", "field 5 (C2): empty id"},
  };
  CriteoTsvOptions options;
  options.schema = CriteoSchema(2, 2, 1);
  std::string all;
  int k = 0;
  for (const Case& c : cases) {
    const std::string path = dir + "/bad" + std::to_string(k++) + ".tsv";
    WriteFileBytes(path, good + "\n" + good + "\n" + c.line + "\n" + good + "\n");
    auto batch = ReadAll(path, options);
    ASSERT_FALSE(batch.ok()) << c.line;
    EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(batch.status().message().find(path + " line 3"), std::string::npos)
        << batch.status();
    EXPECT_NE(batch.status().message().find(c.fragment), std::string::npos) << batch.status();
    all += good + "\n" + c.line + "\n";
  }
  // Skip mode counts them and keeps the good lines, intact.
  const std::string path = dir + "/mixed.tsv";
  WriteFileBytes(path, all);
  options.skip_bad_lines = true;
  int64_t bad = 0;
  auto batch = ReadAll(path, options, &bad);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(bad, 8);
  EXPECT_EQ(batch->size, 8);
  EXPECT_TRUE(ValidateBatch(options.schema, *batch).ok());
  EXPECT_EQ(batch->features[1].ids, std::vector<int64_t>(8, 0xbb));
  EXPECT_EQ(batch->dense.size(), 16u);

  // Ids out of a fixed vocabulary.
  options.skip_bad_lines = false;
  options.schema.features[0].vocab_size = 100;  // 0xaa = 170
  auto ranged = ReadAll(dir + "/bad0.tsv", options);
  EXPECT_NE(ranged.status().message().find("line 1: field 4 (C1): id 170 outside [0, 100)"),
            std::string::npos)
      << ranged.status();
}

TEST(CriteoTsvTest, TruncatedGzipIsDataLoss) {
  auto source = Source();
  const std::string dir = MakeTestDir("tsv");
  ASSERT_TRUE(WriteCriteoTsv(*source, 0, 400, dir + "/t.tsv.gz").ok());
  const std::string bytes = ReadFileBytes(dir + "/t.tsv.gz");
  WriteFileBytes(dir + "/cut.tsv.gz", bytes.substr(0, bytes.size() / 2));
  CriteoTsvOptions options;
  options.schema = source->schema();
  auto batch = ReadAll(dir + "/cut.tsv.gz", options);
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kDataLoss) << batch.status();
  EXPECT_EQ(CriteoTsvReader::Open(dir + "/absent.tsv", options).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CriteoTsvTest, ConvertToBinaryEqualsTheSource) {
  auto source = Source();
  const std::string dir = MakeTestDir("tsv");
  ASSERT_TRUE(WriteCriteoTsv(*source, 0, 400, dir + "/s.tsv.gz").ok());
  CriteoTsvOptions options;
  options.schema = source->schema();
  auto stats = ConvertCriteoTsvToBinary(dir + "/s.tsv.gz", dir + "/s.ctrbin", options);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->examples, 400);
  EXPECT_EQ(stats->bad_lines, 0);
  auto binary = CtrBinarySource::Open(dir + "/s.ctrbin");
  ASSERT_TRUE(binary.ok()) << binary.status();
  CtrBatch expected;
  CtrBatch got;
  ASSERT_TRUE(ReadRange(*source, 0, 400, &expected).ok());
  ASSERT_TRUE(ReadRange(**binary, 0, 400, &got).ok());
  EXPECT_EQ(got, expected);
}

TEST(CriteoTsvTest, WriterRefusesDenseValuesThatAreNotCounts) {
  // A source whose dense values are not log(1 + integer).
  class Odd : public CtrSource {
   public:
    Odd() { schema_.num_dense = 1; schema_.features = {{"C1", 0, 1}}; }
    const CtrSchema& schema() const override { return schema_; }
    int64_t num_examples() const override { return 1; }
    absl::Status Read(absl::Span<const int64_t>, CtrBatch* out) const override {
      out->Reset(schema_, 1);
      const float v = 0.5f;
      out->BeginExample(1, &v, 1);
      out->EndExample();
      return absl::OkStatus();
    }
    CtrSchema schema_;
  } odd;
  const std::string path = MakeTestDir("tsv") + "/odd.tsv";
  const absl::Status status = WriteCriteoTsv(odd, 0, 1, path);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not log(1 + x)"), std::string::npos) << status;
  EXPECT_FALSE(PathExists(path));
}

}  // namespace
}  // namespace shardps
