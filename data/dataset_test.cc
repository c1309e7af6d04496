#include "data/dataset.h"

#include <sys/stat.h>

#include <string>

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

}  // namespace
}  // namespace shardps
