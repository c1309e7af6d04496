// Datasets by the names job files give them ("dataset", "data_dir"): what one is from its
// files' headers alone (DescribeDataset: examples, features, classes or click-log schema), for
// the chief, which sizes epochs and creates variables without loading an example; and its
// examples (LoadDataSource), for the workers and the evaluator.
//
// Names:
//   fashion_mnist          the IDX files of Debian's dataset-fashion-mnist (data_dir, or its
//                          default directory): classification of 784 dense features
//   synthetic_ctr:<spec>   click logs generated from a seed (data/ctr/synthetic_ctr_spec.h
//                          has the spec's keys), nothing on disk. The spec's `examples` are
//                          the training split; the test split is the `test` examples that
//                          follow them (key `test`, here only; default min(100000, max(1000,
//                          examples / 5))), drawn from the same planted model, whose AUC on
//                          the test split is the ceiling a trained model can reach.
//   criteo, movielens      click logs in data_dir as train.ctrbin and test.ctrbin
//                          (data/ctr/ctr_binary.h; `ctr_tool convert` makes them from
//                          Criteo-format TSV, gzipped or not)
//
// Thread safety: DatasetInfo is a plain value; a loaded DataSource is immutable and may be
// read from many threads at once.
#ifndef SHARDPS_DATA_DATASET_H_
#define SHARDPS_DATA_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "data/ctr/ctr_batch.h"
#include "data/idx_reader.h"

namespace shardps {

inline constexpr absl::string_view kFashionMnist = "fashion_mnist";
inline constexpr absl::string_view kSyntheticCtr = "synthetic_ctr";

struct DatasetInfo {
  std::string name;  // the job's dataset text, canonical ("fashion_mnist", "synthetic_ctr:...")
  std::string dir;   // where its files are: the job's data_dir, or the dataset's default
  Split split = Split::kTrain;
  int64_t num_examples = 0;
  // Classification of dense features (fashion_mnist): features per example and classes.
  int feature_dim = 0;
  int num_classes = 0;
  // Click logs: the schema (dense features, categorical features and their vocabularies);
  // null for other data.
  std::shared_ptr<const CtrSchema> ctr;
  // The best AUC a model can reach on this split, where it is known (the planted model of
  // synthetic click logs, on the test split as loaded); 0 where it is not.
  double ceiling_auc = 0;
};

// A split of a dataset, in memory or mapped. Each kind of data has its own accessor, which
// returns null on a source of another kind: dense() for classification of dense feature
// vectors, ctr() for click logs. A model asks for the kind it trains on (model/model.h) and
// refuses a source without it.
class DataSource {
 public:
  virtual ~DataSource() = default;
  virtual const DatasetInfo& info() const = 0;
  virtual const Dataset* dense() const { return nullptr; }
  virtual const CtrSource* ctr() const { return nullptr; }
};

// OK for a dataset name these functions know ("" is fashion_mnist; a synthetic_ctr spec is
// parsed); INVALID_ARGUMENT naming it, or the spec's key at fault, otherwise.
absl::Status CheckDatasetName(absl::string_view name);

// Where dataset `name`'s files are: `dir`, or the dataset's default directory when it is
// empty ("" for datasets without one).
std::string DatasetDir(absl::string_view name, absl::string_view dir);

// `name` "" is fashion_mnist; `dir` "" the dataset's default directory. INVALID_ARGUMENT
// naming an unknown dataset or a bad spec; the reader's error (NOT_FOUND, INVALID_ARGUMENT,
// DATA_LOSS naming the file) when the files are missing or bad. Describing a synthetic
// dataset builds its generator (a few milliseconds) and leaves ceiling_auc 0; loading its
// test split computes the ceiling (one pass over the split).
absl::StatusOr<DatasetInfo> DescribeDataset(absl::string_view name, absl::string_view dir,
                                            Split split);
absl::StatusOr<std::shared_ptr<const DataSource>> LoadDataSource(absl::string_view name,
                                                                 absl::string_view dir,
                                                                 Split split);

}  // namespace shardps

#endif  // SHARDPS_DATA_DATASET_H_
