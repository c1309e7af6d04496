#include "data/ctr/id_permutation.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(IdPermutationTest, IsABijectionOfTheRange) {
  for (int64_t n : {1, 2, 3, 5, 17, 64, 1000, 4097}) {
    IdPermutation perm(n, 99);
    std::vector<bool> seen(static_cast<size_t>(n), false);
    for (int64_t r = 0; r < n; ++r) {
      const int64_t id = perm.Apply(r);
      ASSERT_GE(id, 0) << n;
      ASSERT_LT(id, n) << n;
      ASSERT_FALSE(seen[id]) << "n " << n << " rank " << r;
      seen[id] = true;
    }
  }
}

TEST(IdPermutationTest, HotRanksSpreadOverTheRange) {
  const int64_t n = 1000000;
  IdPermutation perm(n, 7);
  std::vector<int> quarter(4, 0);
  for (int64_t r = 0; r < 100; ++r) ++quarter[perm.Apply(r) * 4 / n];
  for (int q = 0; q < 4; ++q) EXPECT_GE(quarter[q], 10) << "quarter " << q;
  EXPECT_NE(perm.Apply(0), 0);
  EXPECT_NE(IdPermutation(n, 8).Apply(0), perm.Apply(0));  // keyed
}

TEST(IdPermutationTest, HashedIdsCoverTheSignedRange) {
  IdPermutation perm(0, 3);
  int negative = 0;
  for (int64_t r = 0; r < 1000; ++r) negative += perm.Apply(r) < 0;
  EXPECT_GT(negative, 400);
  EXPECT_LT(negative, 600);
  EXPECT_NE(perm.Apply(1), perm.Apply(2));
}

}  // namespace
}  // namespace shardps
