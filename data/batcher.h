// Deterministic batching: each epoch visits every example exactly once, in an order that
// depends only on (seed, epoch) and is the same on every machine and standard library, so
// any worker can materialize any batch named by (epoch, batch index) on its own.
//
// Thread safety: a Batcher is safe to use from many threads at once.
#ifndef SHARDPS_DATA_BATCHER_H_
#define SHARDPS_DATA_BATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "data/idx_reader.h"

namespace shardps {

class Batcher {
 public:
  Batcher(int64_t num_examples, uint64_t seed);

  int64_t num_examples() const { return num_examples_; }
  uint64_t seed() const { return seed_; }

  // Batches per epoch. By default the last batch keeps the remainder and may be smaller;
  // with drop_remainder only full batches count. 0 when batch_size <= 0.
  int64_t NumBatches(int64_t batch_size, bool drop_remainder = false) const;

  // The example indices of batch `batch_index` of `epoch`: positions
  // [batch_index * batch_size, ...) of the epoch's permutation. INVALID_ARGUMENT for a
  // negative epoch or a non-positive batch size; OUT_OF_RANGE for a batch index outside
  // [0, NumBatches(batch_size, drop_remainder)).
  absl::StatusOr<std::vector<int64_t>> BatchIndices(int64_t epoch, int64_t batch_index,
                                                    int64_t batch_size,
                                                    bool drop_remainder = false) const;

  // The epoch's full permutation of [0, num_examples) (Fisher-Yates over a mt19937_64
  // seeded from (seed, epoch), with our own unbiased bounded draw).
  std::vector<int64_t> EpochPermutation(int64_t epoch) const;

 private:
  std::shared_ptr<const std::vector<int64_t>> Permutation(int64_t epoch) const;

  const int64_t num_examples_;
  const uint64_t seed_;
  // The last epoch's permutation, since consecutive batches mostly share an epoch.
  mutable absl::Mutex mu_;
  mutable int64_t cached_epoch_ ABSL_GUARDED_BY(mu_) = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> cached_ ABSL_GUARDED_BY(mu_);
};

// Copies the examples `indices` of `dataset` into features_out (indices.size() x
// feature_dim floats, row-major) and labels_out (indices.size() int32s). INVALID_ARGUMENT
// naming the position and index when an index is outside the dataset.
absl::Status GatherBatch(const Dataset& dataset, absl::Span<const int64_t> indices,
                         float* features_out, int32_t* labels_out);

}  // namespace shardps

#endif  // SHARDPS_DATA_BATCHER_H_
