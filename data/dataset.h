// Datasets by the names job files give them ("dataset", "data_dir"): what one is from its
// files' headers alone (DescribeDataset: examples, features, classes), for the chief, which
// sizes epochs and creates variables without loading an example; and its examples
// (LoadDataSource), for the workers and the evaluator.
//
// Thread safety: DatasetInfo is a plain value; a loaded DataSource is immutable and may be
// read from many threads at once.
#ifndef SHARDPS_DATA_DATASET_H_
#define SHARDPS_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/idx_reader.h"

namespace shardps {

inline constexpr absl::string_view kFashionMnist = "fashion_mnist";

struct DatasetInfo {
  std::string name;  // "fashion_mnist"
  std::string dir;   // where its files are: the job's data_dir, or the dataset's default
  Split split = Split::kTrain;
  int64_t num_examples = 0;
  int feature_dim = 0;  // dense features per example
  int num_classes = 0;  // classification: labels are in [0, num_classes)
};

// A split of a dataset, in memory. Each kind of data has its own accessor, which returns
// null on a source of another kind: dense() for classification of dense feature vectors.
// A model asks for the kind it trains on (model/model.h) and refuses a source without it.
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual const DatasetInfo& info() const = 0;
  virtual const Dataset* dense() const { return nullptr; }
};

// OK for a dataset name these functions know ("" is fashion_mnist); INVALID_ARGUMENT naming it
// and the known ones otherwise.
absl::Status CheckDatasetName(absl::string_view name);

// Where dataset `name`'s files are: `dir`, or the dataset's default directory when it is empty.
std::string DatasetDir(absl::string_view name, absl::string_view dir);

// `name` "" is fashion_mnist (the job file's default); `dir` "" the dataset's default
// directory. INVALID_ARGUMENT naming an unknown dataset; the reader's error (NOT_FOUND,
// INVALID_ARGUMENT, DATA_LOSS naming the file) when the files are missing or bad.
absl::StatusOr<DatasetInfo> DescribeDataset(absl::string_view name, absl::string_view dir,
                                            Split split);
absl::StatusOr<std::shared_ptr<const DataSource>> LoadDataSource(absl::string_view name,
                                                                 absl::string_view dir,
                                                                 Split split);

}  // namespace shardps

#endif  // SHARDPS_DATA_DATASET_H_
