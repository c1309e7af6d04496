#include "data/idx_reader.h"

#include <zlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

void PutBigEndian32(std::vector<uint8_t>* out, uint32_t v) {
  out->push_back(v >> 24);
  out->push_back(v >> 16);
  out->push_back(v >> 8);
  out->push_back(v);
}

std::vector<uint8_t> ImagesIdx(uint32_t n, uint32_t rows, uint32_t cols,
                               const std::vector<uint8_t>& pixels) {
  std::vector<uint8_t> b;
  PutBigEndian32(&b, 0x00000803);
  PutBigEndian32(&b, n);
  PutBigEndian32(&b, rows);
  PutBigEndian32(&b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}

std::vector<uint8_t> LabelsIdx(const std::vector<uint8_t>& labels) {
  std::vector<uint8_t> b;
  PutBigEndian32(&b, 0x00000801);
  PutBigEndian32(&b, labels.size());
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

std::string WriteRaw(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = TmpPath(name);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  return path;
}

std::string WriteGz(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = TmpPath(name);
  gzFile gz = gzopen(path.c_str(), "wb");
  EXPECT_NE(gz, nullptr);
  EXPECT_EQ(gzwrite(gz, bytes.data(), bytes.size()), static_cast<int>(bytes.size()));
  gzclose(gz);
  return path;
}

std::vector<uint8_t> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Three 2x3 images with pixels 0, 1, ..., 17 and labels 2, 0, 9.
const std::vector<uint8_t> kPixels = {0,  1,  2,  3,  4,  5,  6,  7,  8,
                                      9,  10, 11, 12, 13, 14, 15, 16, 255};
const std::vector<uint8_t> kLabels = {2, 0, 9};

void ExpectSmallDataset(const Dataset& ds) {
  EXPECT_EQ(ds.num_examples, 3);
  EXPECT_EQ(ds.feature_dim, 6);
  EXPECT_EQ(ds.num_classes, 10);
  ASSERT_EQ(ds.features.size(), 18u);
  for (size_t i = 0; i < kPixels.size(); ++i) {
    EXPECT_FLOAT_EQ(ds.features[i], kPixels[i] / 255.0f) << i;
  }
  EXPECT_EQ(ds.features[17], 1.0f);
  EXPECT_THAT(ds.labels, ::testing::ElementsAre(2, 0, 9));
}

TEST(IdxReaderTest, ReadsPlainFiles) {
  const std::string images = WriteRaw("plain-images", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteRaw("plain-labels", LabelsIdx(kLabels));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectSmallDataset(*ds);
}

TEST(IdxReaderTest, ReadsGzippedFiles) {
  const std::string images = WriteGz("gz-images.gz", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteGz("gz-labels.gz", LabelsIdx(kLabels));
  ASSERT_EQ(ReadFile(images)[0], 0x1f);
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectSmallDataset(*ds);
}

TEST(IdxReaderTest, MixesGzippedAndPlain) {
  const std::string images = WriteGz("mix-images.gz", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteRaw("mix-labels", LabelsIdx(kLabels));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  ASSERT_TRUE(ds.ok()) << ds.status();
  ExpectSmallDataset(*ds);
}

TEST(IdxReaderTest, ReadsNonSquareImagesOfAnySize) {
  std::vector<uint8_t> pixels(2 * 5 * 7, 51);
  const std::string images = WriteGz("odd-images.gz", ImagesIdx(2, 5, 7, pixels));
  const std::string labels = WriteGz("odd-labels.gz", LabelsIdx({1, 2}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels, 3);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->feature_dim, 35);
  EXPECT_EQ(ds->num_classes, 3);
  EXPECT_FLOAT_EQ(ds->features[69], 0.2f);
}

TEST(IdxReaderTest, ShapeFromTheHeadersAloneOfGzippedAndPlainFiles) {
  const std::string images = WriteGz("shape-images.gz", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteRaw("shape-labels", LabelsIdx(kLabels));
  absl::StatusOr<IdxShape> shape = ReadIdxShape(images, labels);
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->num_examples, 3);
  EXPECT_EQ(shape->feature_dim, 6);

  // The payload is not read: a file cut short after its header still has a shape (the
  // loader rejects it).
  std::vector<uint8_t> cut = ImagesIdx(3, 2, 3, kPixels);
  cut.resize(16);
  const std::string short_images = WriteRaw("shape-short-images", cut);
  EXPECT_TRUE(ReadIdxShape(short_images, labels).ok());
  EXPECT_EQ(LoadIdxDataset(short_images, labels).status().code(), absl::StatusCode::kDataLoss);
}

TEST(IdxReaderTest, ShapeErrorsNameTheFile) {
  const std::string images = WriteRaw("shape-e-images", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteRaw("shape-e-labels", LabelsIdx(kLabels));
  const std::string missing = TmpPath("shape-no-such-images.gz");
  absl::StatusOr<IdxShape> shape = ReadIdxShape(missing, labels);
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(shape.status().message(), HasSubstr(missing));

  shape = ReadIdxShape(labels, labels);  // labels passed as images: bad magic
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr(labels));

  const std::string two_labels = WriteRaw("shape-e-two-labels", LabelsIdx({1, 2}));
  shape = ReadIdxShape(images, two_labels);
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("counts differ"));

  const std::string header_cut = WriteRaw("shape-e-cut", {0, 0, 8, 3, 0, 0});
  shape = ReadIdxShape(header_cut, labels);
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(shape.status().message(), HasSubstr(header_cut));
}

// The feature count of two dimensions near 2^32 overflowed (UBSan, on
// fuzz/corpus/idx_fuzzer/regression_shape_overflow).
TEST(IdxReaderTest, ShapeOfImagesTooLargeIsAnError) {
  const std::string images =
      WriteRaw("shape-huge-images", ImagesIdx(1, 0xf0000000u, 0xf0000000u, {}));
  const std::string labels = WriteRaw("shape-huge-labels", LabelsIdx({0}));
  const absl::StatusOr<IdxShape> shape = ReadIdxShape(images, labels);
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(shape.status().message(), HasSubstr("dimensions are too large"));
  EXPECT_THAT(shape.status().message(), HasSubstr(images));
}

TEST(IdxReaderTest, MissingFileIsNotFoundAndNamesPath) {
  const std::string labels = WriteRaw("missing-labels", LabelsIdx(kLabels));
  const std::string missing = TmpPath("no-such-images.gz");
  absl::StatusOr<Dataset> ds = LoadIdxDataset(missing, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr(missing));
}

TEST(IdxReaderTest, BadMagicSaysExpectedAndFound) {
  // The labels file passed as images.
  const std::string labels = WriteGz("magic-labels.gz", LabelsIdx(kLabels));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(labels, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("expected 0x00000803, found 0x00000801"));
  EXPECT_THAT(ds.status().message(), HasSubstr(labels));
  EXPECT_THAT(ds.status().message(), HasSubstr("images file"));
}

TEST(IdxReaderTest, TruncatedDataSaysExpectedBytes) {
  std::vector<uint8_t> bytes = ImagesIdx(3, 2, 3, kPixels);
  bytes.resize(bytes.size() - 5);
  const std::string images = WriteRaw("trunc-images", bytes);
  const std::string labels = WriteRaw("trunc-labels", LabelsIdx(kLabels));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ds.status().message(), HasSubstr("expected 34 bytes"));
  EXPECT_THAT(ds.status().message(), HasSubstr("found 29"));
  EXPECT_THAT(ds.status().message(), HasSubstr(images));
}

TEST(IdxReaderTest, TruncatedHeader) {
  std::vector<uint8_t> bytes = LabelsIdx(kLabels);
  bytes.resize(6);
  const std::string images = WriteRaw("hdr-images", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteGz("hdr-labels.gz", bytes);
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(ds.status().message(), HasSubstr("8-byte header"));
  EXPECT_THAT(ds.status().message(), HasSubstr(labels));
}

TEST(IdxReaderTest, TruncatedGzipStream) {
  std::vector<uint8_t> pixels(3000);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = (i * 7919) % 251;
  const std::string full = WriteGz("cut-full.gz", ImagesIdx(3, 20, 50, pixels));
  std::vector<uint8_t> gz = ReadFile(full);
  gz.resize(gz.size() / 2);
  const std::string images = WriteRaw("cut-images.gz", gz);
  const std::string labels = WriteRaw("cut-labels", LabelsIdx(kLabels));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kDataLoss) << ds.status();
  EXPECT_THAT(ds.status().message(), HasSubstr(images));
}

TEST(IdxReaderTest, TrailingBytesAreRejected) {
  std::vector<uint8_t> bytes = LabelsIdx(kLabels);
  bytes.push_back(0);
  const std::string images = WriteRaw("trail-images", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteRaw("trail-labels", bytes);
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("1 trailing bytes"));
}

TEST(IdxReaderTest, CountMismatch) {
  const std::string images = WriteRaw("count-images", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteRaw("count-labels", LabelsIdx({1, 2}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("3 images"));
  EXPECT_THAT(ds.status().message(), HasSubstr("2 labels"));
}

TEST(IdxReaderTest, LabelOutOfRange) {
  const std::string images = WriteRaw("range-images", ImagesIdx(3, 2, 3, kPixels));
  const std::string labels = WriteRaw("range-labels", LabelsIdx({1, 2, 10}));
  absl::StatusOr<Dataset> ds = LoadIdxDataset(images, labels, 10);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ds.status().message(), HasSubstr("label 10 at index 2 is out of range [0, 10)"));
  EXPECT_THAT(ds.status().message(), HasSubstr(labels));
}

TEST(IdxReaderTest, FashionMnistNamesMissingFile) {
  const std::string dir = TmpPath("empty-dir");
  absl::StatusOr<Dataset> ds = LoadFashionMnist(dir, Split::kTest);
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(ds.status().message(), HasSubstr(dir + "/t10k-images-idx3-ubyte.gz"));
}

}  // namespace
}  // namespace shardps
