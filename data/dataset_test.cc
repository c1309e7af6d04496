#include "data/dataset.h"

#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "data/ctr/ctr_binary.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::HasSubstr;

TEST(DatasetTest, DescribeReadsTheShapeThatLoadingFinds) {
  struct stat st;
  ASSERT_EQ(stat(std::string(kDefaultFashionMnistDir).c_str(), &st), 0)
      << kDefaultFashionMnistDir << " is missing: apt-get install -y dataset-fashion-mnist";
  for (Split split : {Split::kTrain, Split::kTest}) {
    absl::StatusOr<DatasetInfo> info = DescribeDataset("", "", split);
    ASSERT_TRUE(info.ok()) << info.status();
    absl::StatusOr<std::shared_ptr<const DataSource>> source =
        LoadDataSource("fashion_mnist", kDefaultFashionMnistDir, split);
    ASSERT_TRUE(source.ok()) << source.status();
    const DatasetInfo& loaded = (*source)->info();
    EXPECT_EQ(info->name, "fashion_mnist");
    EXPECT_EQ(info->dir, kDefaultFashionMnistDir);
    EXPECT_EQ(info->num_examples, split == Split::kTrain ? 60000 : 10000);
    EXPECT_EQ(info->num_examples, loaded.num_examples);
    EXPECT_EQ(info->feature_dim, 784);
    EXPECT_EQ(info->feature_dim, loaded.feature_dim);
    EXPECT_EQ(info->num_classes, loaded.num_classes);
    ASSERT_NE((*source)->dense(), nullptr);
    EXPECT_EQ((*source)->dense()->num_examples, loaded.num_examples);
  }
}

TEST(DatasetTest, UnknownNameAndMissingDirectoryAreNamed) {
  absl::StatusOr<DatasetInfo> info = DescribeDataset("cifar", "", Split::kTrain);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(info.status().message(), HasSubstr("\"cifar\""));
  EXPECT_EQ(LoadDataSource("cifar", "", Split::kTrain).status().code(),
            absl::StatusCode::kInvalidArgument);

  const std::string dir = "/nonexistent/shardps-dataset-test";
  info = DescribeDataset("fashion_mnist", dir, Split::kTest);
  EXPECT_EQ(info.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(info.status().message(), HasSubstr(dir));
  absl::StatusOr<std::shared_ptr<const DataSource>> source =
      LoadDataSource("fashion_mnist", dir, Split::kTest);
  EXPECT_EQ(source.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(source.status().message(), HasSubstr(dir));
}

TEST(DatasetTest, SyntheticClickLogsSplitIntoTrainAndTheExamplesThatFollow) {
  const std::string name = "synthetic_ctr:examples=4000,tables=3,vocab=1000,dense=2,test=500";
  ASSERT_TRUE(CheckDatasetName(name).ok());
  absl::StatusOr<DatasetInfo> train = DescribeDataset(name, "", Split::kTrain);
  ASSERT_TRUE(train.ok()) << train.status();
  EXPECT_EQ(train->num_examples, 4000);
  ASSERT_NE(train->ctr, nullptr);
  EXPECT_EQ(train->ctr->num_dense, 2);
  EXPECT_EQ(train->ctr->features.size(), 3u);
  EXPECT_EQ(train->ceiling_auc, 0);  // described, not computed
  EXPECT_TRUE(absl::StartsWith(train->name, "synthetic_ctr:")) << train->name;
  // The canonical text names the same dataset.
  absl::StatusOr<DatasetInfo> again = DescribeDataset(train->name, "", Split::kTrain);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->name, train->name);

  absl::StatusOr<std::shared_ptr<const DataSource>> test = LoadDataSource(name, "", Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->info().num_examples, 500);
  EXPECT_EQ((*test)->dense(), nullptr);
  ASSERT_NE((*test)->ctr(), nullptr);
  EXPECT_GT((*test)->info().ceiling_auc, 0.6);
  EXPECT_LT((*test)->info().ceiling_auc, 1.0);

  // Test example i is example 4000 + i of the same generator.
  absl::StatusOr<std::shared_ptr<const DataSource>> whole =
      LoadDataSource("synthetic_ctr:examples=4500,tables=3,vocab=1000,dense=2", "", Split::kTrain);
  ASSERT_TRUE(whole.ok()) << whole.status();
  CtrBatch a, b;
  ASSERT_TRUE((*test)->ctr()->Read({0, 499}, &a).ok());
  ASSERT_TRUE((*whole)->ctr()->Read({4000, 4499}, &b).ok());
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_EQ(a.dense, b.dense);
  EXPECT_EQ(a.features[1].ids, b.features[1].ids);
}

TEST(DatasetTest, ClickLogFilesAreReadFromTheDataDir) {
  const std::string dir = ::testing::TempDir() + "/ctr_files";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  absl::StatusOr<std::shared_ptr<const DataSource>> synthetic =
      LoadDataSource("synthetic_ctr:examples=300,tables=2,vocab=50,dense=1,test=100", "",
                     Split::kTrain);
  ASSERT_TRUE(synthetic.ok()) << synthetic.status();
  ASSERT_TRUE(WriteCtrBinary(*(*synthetic)->ctr(), 0, 300, dir + "/train.ctrbin", "t").ok());
  ASSERT_TRUE(WriteCtrBinary(*(*synthetic)->ctr(), 0, 100, dir + "/test.ctrbin", "t").ok());
  absl::StatusOr<DatasetInfo> info = DescribeDataset("criteo", dir, Split::kTrain);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_examples, 300);
  absl::StatusOr<std::shared_ptr<const DataSource>> test =
      LoadDataSource("movielens", dir, Split::kTest);
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ((*test)->info().num_examples, 100);
  EXPECT_EQ((*test)->info().ctr->features.size(), 2u);

  absl::StatusOr<DatasetInfo> no_dir = DescribeDataset("criteo", "", Split::kTrain);
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(no_dir.status().message(), HasSubstr("data_dir"));
  absl::StatusOr<DatasetInfo> missing = DescribeDataset("criteo", dir + "/none", Split::kTrain);
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(dir + "/none/train.ctrbin"));
}

TEST(DatasetTest, BadSyntheticSpecsNameTheKey) {
  absl::Status s = CheckDatasetName("synthetic_ctr:examples=10,bogus=1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("bogus"));
  s = CheckDatasetName("synthetic_ctr:examples=10,test=0");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("\"test\""));
  s = CheckDatasetName("synthetic_ctr:test=5,test=6");
  EXPECT_THAT(s.message(), HasSubstr("twice"));
}

}  // namespace
}  // namespace shardps
