// Fuzz target: the IDX reader (data/idx_reader.h). The input holds two files: a 4-byte
// little-endian length L, then L bytes of the images file, then the labels file (the rest;
// an input shorter than 4 bytes is all labels, with an empty images file). Either may be
// gzipped. Both are written to temporary files and read by ReadIdxShape and LoadIdxDataset;
// when both succeed they must agree on the shape, and every feature lies in [0, 1] and
// every label in [0, 10).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/string_view.h"
#include "data/idx_reader.h"
#include "fuzz/fuzz_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  absl::string_view images, labels = input;
  if (input.size() >= 4) {
    const uint32_t length = uint32_t{data[0]} | uint32_t{data[1]} << 8 |
                            uint32_t{data[2]} << 16 | uint32_t{data[3]} << 24;
    const absl::string_view rest = input.substr(4);
    images = rest.substr(0, length);
    labels = rest.substr(images.size());
  }
  const std::string images_path = shardps::WriteFuzzFile("images-idx3-ubyte", images);
  const std::string labels_path = shardps::WriteFuzzFile("labels-idx1-ubyte", labels);
  absl::StatusOr<shardps::IdxShape> shape = shardps::ReadIdxShape(images_path, labels_path);
  absl::StatusOr<shardps::Dataset> dataset =
      shardps::LoadIdxDataset(images_path, labels_path, 10);
  if (!dataset.ok()) return 0;
  if (!shape.ok() || shape->num_examples != dataset->num_examples ||
      shape->feature_dim != dataset->feature_dim) {
    std::fprintf(stderr, "ReadIdxShape (%s) disagrees with LoadIdxDataset\n",
                 shape.status().ToString().c_str());
    std::abort();
  }
  if (dataset->features.size() !=
          static_cast<size_t>(dataset->num_examples * dataset->feature_dim) ||
      dataset->labels.size() != static_cast<size_t>(dataset->num_examples)) {
    std::abort();
  }
  for (float f : dataset->features) {
    if (!(f >= 0.0f && f <= 1.0f)) std::abort();
  }
  for (int32_t label : dataset->labels) {
    if (label < 0 || label >= 10) std::abort();
  }
  return 0;
}
