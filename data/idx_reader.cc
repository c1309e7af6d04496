#include "data/idx_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

constexpr uint32_t kImagesMagic = 0x00000803;  // unsigned bytes, 3 dimensions
constexpr uint32_t kLabelsMagic = 0x00000801;  // unsigned bytes, 1 dimension

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

// Reads the whole file, inflating it when it starts with the gzip magic 0x1f 0x8b.
absl::StatusOr<std::vector<uint8_t>> ReadMaybeGzipped(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    const int err = errno;
    const std::string msg = absl::StrCat("cannot open ", path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  uint8_t head[2] = {0, 0};
  const size_t head_len = std::fread(head, 1, 2, f.get());
  const bool gzipped = head_len == 2 && head[0] == 0x1f && head[1] == 0x8b;

  std::vector<uint8_t> data;
  if (!gzipped) {
    data.assign(head, head + head_len);
    uint8_t buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) data.insert(data.end(), buf, buf + n);
    if (std::ferror(f.get())) return absl::DataLossError(absl::StrCat("error reading ", path));
    return data;
  }
  f.reset();

  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) return absl::DataLossError(absl::StrCat("cannot gzopen ", path));
  gzbuffer(gz, 1 << 17);
  constexpr size_t kChunk = 1 << 20;
  for (;;) {
    const size_t old = data.size();
    data.resize(old + kChunk);
    const int n = gzread(gz, data.data() + old, kChunk);
    if (n < 0) {
      int errnum = 0;
      const std::string msg = gzerror(gz, &errnum);
      gzclose(gz);
      return absl::DataLossError(
          absl::StrCat(path, ": corrupt or truncated gzip stream: ", msg));
    }
    data.resize(old + static_cast<size_t>(n));
    if (n == 0) break;
  }
  // gzread reports a stream cut short inside the deflate data as an error above; one cut
  // short before its trailer shows up here.
  int errnum = 0;
  const char* msg = gzerror(gz, &errnum);
  if (errnum != Z_OK && errnum != Z_STREAM_END) {
    const std::string m = msg;
    gzclose(gz);
    return absl::DataLossError(absl::StrCat(path, ": corrupt or truncated gzip stream: ", m));
  }
  gzclose(gz);
  return data;
}

uint32_t ReadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// A parsed IDX file: its dimensions and a view of its payload (inside `bytes`).
struct IdxFile {
  std::vector<uint8_t> bytes;
  std::vector<int64_t> dims;
  const uint8_t* payload = nullptr;
};

absl::StatusOr<IdxFile> ReadIdx(const std::string& path, uint32_t expected_magic,
                                absl::string_view what) {
  IdxFile file;
  ASSIGN_OR_RETURN(file.bytes, ReadMaybeGzipped(path));
  const std::vector<uint8_t>& b = file.bytes;
  if (b.size() < 4) {
    return absl::DataLossError(absl::StrFormat(
        "%s file %s is truncated: expected at least 4 bytes of IDX magic, found %d", what, path,
        b.size()));
  }
  const uint32_t magic = ReadBigEndian32(b.data());
  if (magic != expected_magic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s file %s has bad magic: expected 0x%08x, found 0x%08x", what, path, expected_magic,
        magic));
  }
  const size_t ndims = magic & 0xff;
  const size_t header = 4 + 4 * ndims;
  if (b.size() < header) {
    return absl::DataLossError(absl::StrFormat(
        "%s file %s is truncated: expected a %d-byte header, found %d bytes", what, path, header,
        b.size()));
  }
  int64_t payload = 1;
  for (size_t i = 0; i < ndims; ++i) {
    const int64_t d = ReadBigEndian32(b.data() + 4 + 4 * i);
    file.dims.push_back(d);
    // Each dimension is below 2^32, so this bound keeps the product in range.
    if (d > 0 && payload > (std::numeric_limits<int64_t>::max() >> 32)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s file %s: dimensions are too large", what, path));
    }
    payload *= d;
  }
  const int64_t expected = static_cast<int64_t>(header) + payload;
  const int64_t found = static_cast<int64_t>(b.size());
  if (found < expected) {
    return absl::DataLossError(absl::StrFormat(
        "%s file %s is truncated: expected %d bytes (%d-byte header + %d data bytes), found %d",
        what, path, expected, header, payload, found));
  }
  if (found > expected) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s file %s has %d trailing bytes after the expected %d", what, path, found - expected,
        expected));
  }
  file.payload = b.data() + header;
  return file;
}

// The magic and dimensions of an IDX file: its first 4 + 4 * ndims bytes (gzread reads a
// plain file as it is).
absl::StatusOr<std::vector<int64_t>> ReadIdxDims(const std::string& path, uint32_t expected_magic,
                                                 absl::string_view what) {
  gzFile gz = gzopen(path.c_str(), "rb");
  if (gz == nullptr) {
    const int err = errno;
    const std::string msg = absl::StrCat("cannot open ", what, " file ", path, ": ",
                                         err != 0 ? std::strerror(err) : "gzopen failed");
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  uint8_t header[4 + 4 * 255];
  const int n = gzread(gz, header, 4);
  uint32_t magic = n == 4 ? ReadBigEndian32(header) : 0;
  const int ndims = static_cast<int>(magic & 0xff);
  const int m = n == 4 && magic == expected_magic ? gzread(gz, header + 4, 4 * ndims) : 0;
  gzclose(gz);
  if (n != 4) {
    return absl::DataLossError(absl::StrFormat(
        "%s file %s is truncated: expected at least 4 bytes of IDX magic", what, path));
  }
  if (magic != expected_magic) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s file %s has bad magic: expected 0x%08x, found 0x%08x", what, path, expected_magic,
        magic));
  }
  if (m != 4 * ndims) {
    return absl::DataLossError(absl::StrFormat(
        "%s file %s is truncated: expected a %d-byte header", what, path, 4 + 4 * ndims));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < ndims; ++i) dims.push_back(ReadBigEndian32(header + 4 + 4 * i));
  return dims;
}

}  // namespace

absl::StatusOr<IdxShape> ReadIdxShape(const std::string& images_path,
                                      const std::string& labels_path) {
  ASSIGN_OR_RETURN(std::vector<int64_t> images, ReadIdxDims(images_path, kImagesMagic, "images"));
  ASSIGN_OR_RETURN(std::vector<int64_t> labels, ReadIdxDims(labels_path, kLabelsMagic, "labels"));
  if (images[0] != labels[0]) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "image and label counts differ: %s has %d images, %s has %d labels", images_path,
        images[0], labels_path, labels[0]));
  }
  if (images[0] == 0) return absl::InvalidArgumentError(absl::StrCat(images_path, " has no examples"));
  // Each dimension is below 2^32, so their product may not fit an int64 (LoadIdxDataset
  // bounds it by the file's size; only the header is read here).
  if (images[1] > 0 && images[2] > std::numeric_limits<int64_t>::max() / images[1]) {
    return absl::InvalidArgumentError(
        absl::StrFormat("images file %s: dimensions are too large", images_path));
  }
  IdxShape shape;
  shape.num_examples = images[0];
  shape.feature_dim = images[1] * images[2];
  return shape;
}

absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path, int num_classes) {
  if (num_classes < 1 || num_classes > 256) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_classes must be in [1, 256] for byte labels, got ", num_classes));
  }
  ASSIGN_OR_RETURN(IdxFile images, ReadIdx(images_path, kImagesMagic, "images"));
  ASSIGN_OR_RETURN(IdxFile labels, ReadIdx(labels_path, kLabelsMagic, "labels"));

  const int64_t n = images.dims[0];
  if (n != labels.dims[0]) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "image and label counts differ: %s has %d images, %s has %d labels", images_path, n,
        labels_path, labels.dims[0]));
  }
  if (n == 0) return absl::InvalidArgumentError(absl::StrCat(images_path, " has no examples"));

  Dataset ds;
  ds.num_examples = n;
  ds.feature_dim = images.dims[1] * images.dims[2];
  ds.num_classes = num_classes;
  if (ds.feature_dim == 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s has empty images (%d x %d)", images_path, images.dims[1], images.dims[2]));
  }
  ds.labels.resize(n);
  for (int64_t i = 0; i < n; ++i) {
    const int32_t label = labels.payload[i];
    if (label >= num_classes) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s: label %d at index %d is out of range [0, %d)", labels_path, label, i, num_classes));
    }
    ds.labels[i] = label;
  }
  labels = IdxFile();  // Release the bytes before the large allocation below.

  const int64_t total = n * ds.feature_dim;
  ds.features.resize(total);
  float scale[256];  // Exact x / 255, the same on every machine.
  for (int v = 0; v < 256; ++v) scale[v] = static_cast<float>(v) / 255.0f;
  for (int64_t i = 0; i < total; ++i) ds.features[i] = scale[images.payload[i]];
  return ds;
}

namespace {
std::string FashionMnistPath(absl::string_view dir, Split split, absl::string_view kind) {
  return absl::StrCat(dir, "/", split == Split::kTrain ? "train" : "t10k", "-", kind,
                      "-ubyte.gz");
}
}  // namespace

absl::StatusOr<Dataset> LoadFashionMnist(absl::string_view dir, Split split) {
  return LoadIdxDataset(FashionMnistPath(dir, split, "images-idx3"),
                        FashionMnistPath(dir, split, "labels-idx1"), 10);
}

absl::StatusOr<IdxShape> ReadFashionMnistShape(absl::string_view dir, Split split) {
  return ReadIdxShape(FashionMnistPath(dir, split, "images-idx3"),
                      FashionMnistPath(dir, split, "labels-idx1"));
}

}  // namespace shardps
