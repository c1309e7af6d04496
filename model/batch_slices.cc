#include "model/batch_slices.h"

#include <algorithm>

namespace shardps {

int NumSlices(int batch, int num_threads, int min_rows) {
  return std::max(1, std::min(num_threads, (batch + min_rows - 1) / min_rows));
}

BatchSlice SliceOfBatch(int batch, int num_slices, int s) {
  BatchSlice slice;
  slice.begin = static_cast<int>(int64_t{batch} * s / num_slices);
  slice.rows = static_cast<int>(int64_t{batch} * (s + 1) / num_slices) - slice.begin;
  return slice;
}

void AddPartials(ParallelFor& parallel, int num_threads, absl::Span<const int64_t> sizes,
                 absl::Span<float* const> dst, absl::Span<const float* const> partials) {
  parallel.ForEach(num_threads, [&](int64_t t) {
    int64_t offset = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      const int64_t size = sizes[i];
      const int64_t lo = size * t / num_threads, hi = size * (t + 1) / num_threads;
      float* g = dst[i];
      for (const float* partial : partials) {
        const float* part = partial + offset;
        for (int64_t k = lo; k < hi; ++k) g[k] += part[k];
      }
      offset += size;
    }
  });
}

}  // namespace shardps
