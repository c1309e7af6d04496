// Loads the real Fashion-MNIST. Fails (never skips) when the data is not installed, so a
// machine missing it is noticed.
#include <sys/stat.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "data/batcher.h"
#include "data/idx_reader.h"

namespace shardps {
namespace {

bool DatasetInstalled() {
  struct stat st;
  return stat(std::string(kDefaultFashionMnistDir).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void CheckSplit(Split split, int64_t expected_examples) {
  ASSERT_TRUE(DatasetInstalled())
      << kDefaultFashionMnistDir
      << " does not exist: install Debian's dataset-fashion-mnist package "
         "(apt-get install -y dataset-fashion-mnist)";
  absl::StatusOr<Dataset> ds = LoadFashionMnist(kDefaultFashionMnistDir, split);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->num_examples, expected_examples);
  EXPECT_EQ(ds->feature_dim, 784);
  EXPECT_EQ(ds->num_classes, 10);
  ASSERT_EQ(ds->features.size(), static_cast<size_t>(expected_examples * 784));
  ASSERT_EQ(ds->labels.size(), static_cast<size_t>(expected_examples));
  // Fashion-MNIST is balanced: every class has a tenth of the examples.
  std::vector<int64_t> per_class(10, 0);
  for (int32_t label : ds->labels) {
    ASSERT_GE(label, 0);
    ASSERT_LT(label, 10);
    ++per_class[label];
  }
  for (int c = 0; c < 10; ++c) EXPECT_EQ(per_class[c], expected_examples / 10) << "class " << c;
  float lo = 1, hi = 0;
  for (float f : ds->features) {
    lo = std::min(lo, f);
    hi = std::max(hi, f);
  }
  EXPECT_EQ(lo, 0.0f);
  EXPECT_EQ(hi, 1.0f);

  Batcher batcher(ds->num_examples, 7);
  absl::StatusOr<std::vector<int64_t>> idx = batcher.BatchIndices(0, 3, 256);
  ASSERT_TRUE(idx.ok()) << idx.status();
  std::vector<float> features(256 * 784);
  std::vector<int32_t> labels(256);
  ASSERT_TRUE(GatherBatch(*ds, *idx, features.data(), labels.data()).ok());
  EXPECT_EQ(labels[5], ds->labels[(*idx)[5]]);
  EXPECT_EQ(features[5 * 784 + 400], ds->features[(*idx)[5] * 784 + 400]);
}

TEST(FashionMnistTest, Train) { CheckSplit(Split::kTrain, 60000); }

TEST(FashionMnistTest, Test) { CheckSplit(Split::kTest, 10000); }

}  // namespace
}  // namespace shardps
