#include "data/dataset.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "data/ctr/ctr_binary.h"
#include "data/ctr/synthetic_ctr.h"
#include "data/ctr/synthetic_ctr_spec.h"

namespace shardps {
namespace {

constexpr absl::string_view kCtrFileDatasets[] = {"criteo", "movielens"};

class DenseSource : public DataSource {
 public:
  DenseSource(DatasetInfo info, Dataset data) : info_(std::move(info)), data_(std::move(data)) {}
  const DatasetInfo& info() const override { return info_; }
  const Dataset* dense() const override { return &data_; }

 private:
  const DatasetInfo info_;
  const Dataset data_;
};

class CtrDataSource : public DataSource {
 public:
  CtrDataSource(DatasetInfo info, std::unique_ptr<const CtrSource> source)
      : info_(std::move(info)), source_(std::move(source)) {}
  const DatasetInfo& info() const override { return info_; }
  const CtrSource* ctr() const override { return source_.get(); }

 private:
  const DatasetInfo info_;
  const std::unique_ptr<const CtrSource> source_;
};

bool IsFashionMnist(absl::string_view name) { return name.empty() || name == kFashionMnist; }

bool IsCtrFiles(absl::string_view name) {
  return std::find(std::begin(kCtrFileDatasets), std::end(kCtrFileDatasets), name) !=
         std::end(kCtrFileDatasets);
}

// A synthetic_ctr dataset's spec, split: the generator's config of the requested split.
struct SyntheticSplit {
  SyntheticCtrConfig config;  // of the split
  std::string canonical;      // the whole dataset text, canonical
};

absl::StatusOr<SyntheticSplit> ParseSynthetic(absl::string_view name, Split split) {
  absl::string_view spec = name;
  absl::ConsumePrefix(&spec, kSyntheticCtr);
  absl::ConsumePrefix(&spec, ":");
  // `test=N` is this module's key; the rest is the generator's.
  std::vector<std::string> keep;
  int64_t test = -1;
  for (absl::string_view kv : absl::StrSplit(spec, ',', absl::SkipEmpty())) {
    if (absl::StartsWith(kv, "test=")) {
      if (test >= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("dataset \"", name, "\": key \"test\" is given twice"));
      }
      if (!absl::SimpleAtoi(kv.substr(5), &test) || test < 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            "dataset \"", name, "\": key \"test\" must be a positive integer, got \"",
            kv.substr(5), "\""));
      }
      continue;
    }
    keep.emplace_back(kv);
  }
  absl::StatusOr<SyntheticCtrConfig> config = ParseSyntheticCtrSpec(absl::StrJoin(keep, ","));
  if (!config.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset \"", name, "\": ", config.status().message()));
  }
  if (test < 0) test = std::min<int64_t>(100000, std::max<int64_t>(1000, config->num_examples / 5));
  SyntheticSplit out;
  out.canonical = absl::StrCat(kSyntheticCtr, ":", FormatSyntheticCtrSpec(*config), ",test=", test);
  out.config = *config;
  if (split == Split::kTest) {
    out.config.offset = config->offset + config->num_examples;
    out.config.num_examples = test;
  }
  return out;
}

DatasetInfo FashionMnistInfo(absl::string_view dir, Split split) {
  DatasetInfo info;
  info.name = std::string(kFashionMnist);
  info.dir = DatasetDir(kFashionMnist, dir);
  info.split = split;
  info.num_classes = 10;
  return info;
}

DatasetInfo CtrInfo(std::string name, std::string dir, Split split, const CtrSource& source) {
  DatasetInfo info;
  info.name = std::move(name);
  info.dir = std::move(dir);
  info.split = split;
  info.num_examples = source.num_examples();
  info.ctr = std::make_shared<const CtrSchema>(source.schema());
  info.num_classes = 2;
  return info;
}

// The click-log source of a synthetic or file dataset, and its description (with the
// ceiling when `ceiling` is set and the data is synthetic).
absl::StatusOr<std::shared_ptr<const DataSource>> OpenCtr(absl::string_view name,
                                                          absl::string_view dir, Split split,
                                                          bool ceiling) {
  if (IsCtrFiles(name)) {
    if (dir.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dataset \"", name, "\" needs a data_dir holding train.ctrbin and test.ctrbin"));
    }
    const std::string path =
        absl::StrCat(dir, "/", split == Split::kTrain ? "train" : "test", ".ctrbin");
    ASSIGN_OR_RETURN(std::unique_ptr<CtrBinarySource> source, CtrBinarySource::Open(path));
    DatasetInfo info = CtrInfo(std::string(name), std::string(dir), split, *source);
    return std::shared_ptr<const DataSource>(
        std::make_shared<CtrDataSource>(std::move(info), std::move(source)));
  }
  ASSIGN_OR_RETURN(SyntheticSplit parsed, ParseSynthetic(name, split));
  absl::StatusOr<std::unique_ptr<SyntheticCtrSource>> source =
      SyntheticCtrSource::Create(parsed.config);
  if (!source.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("dataset \"", name, "\": ", source.status().message()));
  }
  DatasetInfo info = CtrInfo(parsed.canonical, "", split, **source);
  if (ceiling) {
    ASSIGN_OR_RETURN(PlantedMetrics planted,
                     (*source)->ComputePlantedMetrics(0, (*source)->num_examples()));
    info.ceiling_auc = planted.auc;
  }
  return std::shared_ptr<const DataSource>(
      std::make_shared<CtrDataSource>(std::move(info), *std::move(source)));
}

}  // namespace

absl::Status CheckDatasetName(absl::string_view name) {
  if (IsFashionMnist(name) || IsCtrFiles(name)) return absl::OkStatus();
  if (name == kSyntheticCtr || absl::StartsWith(name, absl::StrCat(kSyntheticCtr, ":"))) {
    return ParseSynthetic(name, Split::kTrain).status();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dataset \"", name, "\": expected ", kFashionMnist, ", ", kSyntheticCtr,
      ":<spec>, ", absl::StrJoin(kCtrFileDatasets, ", ")));
}

std::string DatasetDir(absl::string_view name, absl::string_view dir) {
  if (!dir.empty()) return std::string(dir);
  if (IsFashionMnist(name)) return std::string(kDefaultFashionMnistDir);
  return "";
}

absl::StatusOr<DatasetInfo> DescribeDataset(absl::string_view name, absl::string_view dir,
                                            Split split) {
  RETURN_IF_ERROR(CheckDatasetName(name));
  if (!IsFashionMnist(name)) {
    ASSIGN_OR_RETURN(std::shared_ptr<const DataSource> source,
                     OpenCtr(name, dir, split, /*ceiling=*/false));
    return source->info();
  }
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
  if (!IsFashionMnist(name)) return OpenCtr(name, dir, split, split == Split::kTest);
  DatasetInfo info = FashionMnistInfo(dir, split);
  ASSIGN_OR_RETURN(Dataset data, LoadFashionMnist(info.dir, split));
  info.num_examples = data.num_examples;
  info.feature_dim = static_cast<int>(data.feature_dim);
  return std::shared_ptr<const DataSource>(
      std::make_shared<DenseSource>(std::move(info), std::move(data)));
}

}  // namespace shardps
