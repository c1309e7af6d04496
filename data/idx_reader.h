// Reads IDX files (the MNIST / Fashion-MNIST format), gzipped or plain, into a dense
// in-memory Dataset of float features in [0, 1] and int32 labels.
//
// Thread safety: the functions are reentrant; a Dataset is a plain value, safe to read
// from many threads once loaded.
#ifndef SHARDPS_DATA_IDX_READER_H_
#define SHARDPS_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

// Examples stored row-major: example i's features are
// features[i * feature_dim, (i + 1) * feature_dim).
struct Dataset {
  int64_t num_examples = 0;
  int64_t feature_dim = 0;
  std::vector<float> features;  // Pixel bytes scaled to [0, 1].
  std::vector<int32_t> labels;  // Each in [0, num_classes).
  int num_classes = 0;
};

// Loads an images file (magic 0x00000803, n x rows x cols unsigned bytes, or any n x d1 x ...
// x dk) and its labels file (magic 0x00000801, n unsigned bytes). Either file may be gzipped
// (detected by its 0x1f8b magic) or plain. Errors: NOT_FOUND for a missing file;
// INVALID_ARGUMENT for a bad magic, counts that differ, a label outside [0, num_classes),
// or trailing bytes; DATA_LOSS for a truncated or corrupt file. Messages name the file.
absl::StatusOr<Dataset> LoadIdxDataset(const std::string& images_path,
                                       const std::string& labels_path,
                                       int num_classes = 10);

// An IDX dataset's size from the two files' headers alone (a few bytes each, gzipped or
// plain), for a process that needs to know how many examples there are without loading them
// (the chief, sizing epochs). Checks the files exist, their magics, and that the counts agree;
// the payloads are checked by LoadIdxDataset. Errors as LoadIdxDataset's, naming the file.
struct IdxShape {
  int64_t num_examples = 0;
  int64_t feature_dim = 0;
};
absl::StatusOr<IdxShape> ReadIdxShape(const std::string& images_path,
                                      const std::string& labels_path);

enum class Split { kTrain, kTest };

// Debian's dataset-fashion-mnist package installs the four files here.
inline constexpr absl::string_view kDefaultFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// Loads train-{images-idx3,labels-idx1}-ubyte.gz or t10k-... from `dir` (10 classes).
absl::StatusOr<Dataset> LoadFashionMnist(absl::string_view dir, Split split);
// Their shape, from the headers alone (ReadIdxShape).
absl::StatusOr<IdxShape> ReadFashionMnistShape(absl::string_view dir, Split split);

}  // namespace shardps

#endif  // SHARDPS_DATA_IDX_READER_H_
