#include "ps_server/row_sums.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(RowSumsTest, SumsRepeatedIdsInOrderOfAppearance) {
  const std::vector<int64_t> ids = {4, 1, 4, 4};
  const std::vector<float> grad = {1, 2, 10, 20, 100, 200, 1000, 2000};
  std::vector<int64_t> unique;
  std::vector<float> summed;
  EXPECT_TRUE(SumDuplicateRows(ids, 5, grad.data(), 2, false, &unique, &summed));
  EXPECT_EQ(unique, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(summed, (std::vector<float>{1101, 2202, 10, 20}));
}

TEST(RowSumsTest, DistinctIdsAreSummedOnlyWhenAsked) {
  const std::vector<int64_t> ids = {2, 0};
  const std::vector<float> grad = {1, 2};
  std::vector<int64_t> unique;
  std::vector<float> summed;
  EXPECT_FALSE(SumDuplicateRows(ids, 3, grad.data(), 1, false, &unique, &summed));
  EXPECT_EQ(unique, (std::vector<int64_t>{2, 0}));
  EXPECT_TRUE(summed.empty());
  // A SYNC step keeps its own copy of the rows.
  EXPECT_FALSE(SumDuplicateRows(ids, 3, grad.data(), 1, true, &unique, &summed));
  EXPECT_EQ(summed, (std::vector<float>{1, 2}));
}

TEST(RowSumsTest, KeysOfADynamicTable) {
  const std::vector<int64_t> keys = {int64_t{1} << 60, -5, int64_t{1} << 60};
  const std::vector<float> grad = {1, 2, 3};
  std::vector<int64_t> unique;
  std::vector<float> summed;
  EXPECT_TRUE(SumDuplicateRows(keys, 0, grad.data(), 1, false, &unique, &summed));
  EXPECT_EQ(unique, (std::vector<int64_t>{int64_t{1} << 60, -5}));
  EXPECT_EQ(summed, (std::vector<float>{4, 2}));
}

}  // namespace
}  // namespace shardps
