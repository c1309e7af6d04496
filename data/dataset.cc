#include "data/dataset.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

class DenseSource : public DataSource {
 public:
  DenseSource(DatasetInfo info, Dataset data) : info_(std::move(info)), data_(std::move(data)) {}
  const DatasetInfo& info() const override { return info_; }
  const Dataset* dense() const override { return &data_; }

 private:
  const DatasetInfo info_;
  const Dataset data_;
};

DatasetInfo FashionMnistInfo(absl::string_view dir, Split split) {
  DatasetInfo info;
  info.name = std::string(kFashionMnist);
  info.dir = DatasetDir(kFashionMnist, dir);
  info.split = split;
  info.num_classes = 10;
  return info;
}

}  // namespace

absl::Status CheckDatasetName(absl::string_view name) {
  if (name.empty() || name == kFashionMnist) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dataset \"", name, "\": expected ", kFashionMnist));
}

std::string DatasetDir(absl::string_view name, absl::string_view dir) {
  if (!dir.empty()) return std::string(dir);
  (void)name;  // every dataset known today is fashion_mnist
  return std::string(kDefaultFashionMnistDir);
}

absl::StatusOr<DatasetInfo> DescribeDataset(absl::string_view name, absl::string_view dir,
                                            Split split) {
  RETURN_IF_ERROR(CheckDatasetName(name));
  DatasetInfo info = FashionMnistInfo(dir, split);
  ASSIGN_OR_RETURN(IdxShape shape, ReadFashionMnistShape(info.dir, split));
  info.num_examples = shape.num_examples;
  info.feature_dim = static_cast<int>(shape.feature_dim);
  return info;
}

absl::StatusOr<std::shared_ptr<const DataSource>> LoadDataSource(absl::string_view name,
                                                                 absl::string_view dir,
                                                                 Split split) {
  RETURN_IF_ERROR(CheckDatasetName(name));
  DatasetInfo info = FashionMnistInfo(dir, split);
  ASSIGN_OR_RETURN(Dataset data, LoadFashionMnist(info.dir, split));
  info.num_examples = data.num_examples;
  info.feature_dim = static_cast<int>(data.feature_dim);
  return std::shared_ptr<const DataSource>(
      std::make_shared<DenseSource>(std::move(info), std::move(data)));
}

}  // namespace shardps
