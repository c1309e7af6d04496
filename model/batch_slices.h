// How the models' CPU computes split one step across their threads: the batch into slices of
// consecutive examples (at most one a thread, none thinner than a minimum), each computing its
// own gradient partials, which are then added to the first slice's in slice order. The split
// depends only on the batch and the thread count, so a step's sums are bit-identical from run
// to run on the same thread count.
//
// Thread safety: pure functions; AddPartials runs on `parallel` and returns when done.
#ifndef SHARDPS_MODEL_BATCH_SLICES_H_
#define SHARDPS_MODEL_BATCH_SLICES_H_

#include <cstdint>

#include "absl/types/span.h"
#include "compute/parallel_for.h"

namespace shardps {

// Slices of a batch of `batch` examples: ceil(batch / min_rows), at most num_threads, at least 1.
int NumSlices(int batch, int num_threads, int min_rows);

// Slice s of num_slices: examples [begin, begin + rows).
struct BatchSlice {
  int begin = 0;
  int rows = 0;
};
BatchSlice SliceOfBatch(int batch, int num_slices, int s);

// For each parameter i (sizes[i] floats): dst[i][k] += partials[j][offset_i + k] for j in
// order, where offset_i is the sum of sizes[0..i) (each partial holds every parameter, packed).
// Split across num_threads tasks on `parallel`, each over its own range of every parameter's
// elements.
void AddPartials(ParallelFor& parallel, int num_threads, absl::Span<const int64_t> sizes,
                 absl::Span<float* const> dst, absl::Span<const float* const> partials);

}  // namespace shardps

#endif  // SHARDPS_MODEL_BATCH_SLICES_H_
