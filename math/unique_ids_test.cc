#include "math/unique_ids.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

// Checks the contract against a plain reference for `ids`.
void ExpectNumbered(const std::vector<int64_t>& ids, int64_t rows) {
  std::vector<int64_t> unique;
  std::vector<uint32_t> slot;
  const bool repeats = UniqueIds(ids, rows, &unique, &slot);
  std::vector<int64_t> expected;
  for (int64_t id : ids) {
    if (std::find(expected.begin(), expected.end(), id) == expected.end()) expected.push_back(id);
  }
  EXPECT_EQ(unique, expected) << "rows " << rows;
  EXPECT_EQ(repeats, expected.size() < ids.size()) << "rows " << rows;
  ASSERT_EQ(slot.size(), ids.size());
  for (size_t k = 0; k < ids.size(); ++k) EXPECT_EQ(unique[slot[k]], ids[k]) << k;
}

TEST(UniqueIdsTest, NumbersInOrderOfFirstAppearance) {
  // Few rows (bitmap) and many rows (hash map) give the same answer.
  for (int64_t rows : {int64_t{10}, int64_t{1} << 30}) {
    ExpectNumbered({}, rows);
    ExpectNumbered({3, 1, 4}, rows);
    ExpectNumbered({4, 1, 4, 9, 1, 4}, rows);
    ExpectNumbered({7, 7, 7}, rows);
  }
}

TEST(UniqueIdsTest, UnboundedKeysOfADynamicTable) {
  // rows 0: any int64, negative ones and the extremes included.
  ExpectNumbered({-5, INT64_MAX, -5, INT64_MIN, 0, INT64_MAX}, 0);
  ExpectNumbered({}, 0);
}

TEST(UniqueIdsTest, RandomIdsOnBothPaths) {
  std::mt19937_64 rng(5);
  for (int64_t rows : {int64_t{1000}, int64_t{1} << 24}) {
    std::uniform_int_distribution<int64_t> pick(0, std::min<int64_t>(rows, 3000) - 1);
    std::vector<int64_t> ids(2000);
    for (int64_t& id : ids) id = pick(rng);
    ExpectNumbered(ids, rows);
  }
}

}  // namespace
}  // namespace shardps
