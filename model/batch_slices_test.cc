#include "model/batch_slices.h"

#include <cstdint>
#include <vector>

#include "compute/parallel_for.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(NumSlicesTest, OneSliceAThreadNoneThinnerThanTheMinimum) {
  EXPECT_EQ(NumSlices(1, 4, 32), 1);
  EXPECT_EQ(NumSlices(32, 4, 32), 1);
  EXPECT_EQ(NumSlices(33, 4, 32), 2);
  EXPECT_EQ(NumSlices(1000, 4, 32), 4);
  EXPECT_EQ(NumSlices(1000, 1, 32), 1);
}

TEST(SliceOfBatchTest, SlicesCoverTheBatchInOrderAndDifferByOneRowAtMost) {
  for (int batch : {1, 7, 64, 100, 257}) {
    for (int n = 1; n <= 5 && n <= batch; ++n) {
      int next = 0;
      for (int s = 0; s < n; ++s) {
        const BatchSlice slice = SliceOfBatch(batch, n, s);
        EXPECT_EQ(slice.begin, next) << batch << "/" << n << " slice " << s;
        EXPECT_GE(slice.rows, batch / n);
        EXPECT_LE(slice.rows, batch / n + 1);
        next += slice.rows;
      }
      EXPECT_EQ(next, batch) << batch << "/" << n;
    }
  }
}

TEST(AddPartialsTest, AddsEveryPartialOfEveryParameterInSliceOrder) {
  ParallelFor parallel(2);
  const std::vector<int64_t> sizes = {5, 1, 7};
  std::vector<std::vector<float>> dst = {std::vector<float>(5, 1.0f), {2.0f},
                                         std::vector<float>(7, 3.0f)};
  // Partials of every parameter packed: 13 floats each.
  // In slice order, start + 1e8 rounds to 1e8 and the sum ends at 0; in any other order
  // it would end at the start value.
  // A third partial then adds its own value, from its parameter's place in the packing.
  const std::vector<float> p1(13, 1e8f), p2(13, -1e8f);
  std::vector<float> p3(13);
  for (int k = 0; k < 13; ++k) p3[k] = static_cast<float>(k);
  std::vector<float*> dst_ptrs = {dst[0].data(), dst[1].data(), dst[2].data()};
  std::vector<const float*> partials = {p1.data(), p2.data(), p3.data()};
  AddPartials(parallel, 3, sizes, dst_ptrs, partials);
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    for (int64_t k = 0; k < sizes[i]; ++k) {
      EXPECT_EQ(dst[i][k], static_cast<float>(offset + k)) << i << "[" << k << "]";
    }
    offset += sizes[i];
  }
}

TEST(AddPartialsTest, NoPartialsLeaveTheDestinationAlone) {
  ParallelFor parallel(0);
  std::vector<float> g = {1.0f, 2.0f};
  std::vector<float*> dst = {g.data()};
  AddPartials(parallel, 1, std::vector<int64_t>{2}, dst, {});
  EXPECT_EQ(g, (std::vector<float>{1.0f, 2.0f}));
}

}  // namespace
}  // namespace shardps
