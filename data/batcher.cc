#include "data/batcher.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "absl/strings/str_format.h"

namespace shardps {
namespace {

// SplitMix64's finalizer: spreads (seed, epoch) over the whole 64-bit seed space so that
// neighbouring epochs get unrelated streams.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// A uniform draw from [0, bound) by rejection. std::uniform_int_distribution's algorithm is
// left to each standard library, so it would not give the same order everywhere; the
// mt19937_64 engine's output, by contrast, is fixed by the standard.
uint64_t Bounded(std::mt19937_64& gen, uint64_t bound) {
  const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
  for (;;) {
    const uint64_t r = gen();
    if (r >= threshold) return r % bound;
  }
}

}  // namespace

Batcher::Batcher(int64_t num_examples, uint64_t seed)
    : num_examples_(num_examples), seed_(seed) {}

int64_t Batcher::NumBatches(int64_t batch_size, bool drop_remainder) const {
  if (batch_size <= 0) return 0;
  return drop_remainder ? num_examples_ / batch_size
                        : (num_examples_ + batch_size - 1) / batch_size;
}

std::vector<int64_t> Batcher::EpochPermutation(int64_t epoch) const {
  std::vector<int64_t> perm(num_examples_);
  for (int64_t i = 0; i < num_examples_; ++i) perm[i] = i;
  std::mt19937_64 gen(Mix(seed_ ^ Mix(static_cast<uint64_t>(epoch))));
  for (int64_t i = num_examples_ - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(Bounded(gen, static_cast<uint64_t>(i) + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::shared_ptr<const std::vector<int64_t>> Batcher::Permutation(int64_t epoch) const {
  {
    absl::MutexLock lock(&mu_);
    if (cached_epoch_ == epoch) return cached_;
  }
  // Computed outside the lock so one slow shuffle does not stall readers of the cache.
  auto perm = std::make_shared<const std::vector<int64_t>>(EpochPermutation(epoch));
  absl::MutexLock lock(&mu_);
  cached_epoch_ = epoch;
  cached_ = perm;
  return perm;
}

absl::StatusOr<std::vector<int64_t>> Batcher::BatchIndices(int64_t epoch, int64_t batch_index,
                                                           int64_t batch_size,
                                                           bool drop_remainder) const {
  if (epoch < 0) return absl::InvalidArgumentError(absl::StrFormat("negative epoch %d", epoch));
  if (batch_size <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat("batch_size must be > 0, got %d", batch_size));
  }
  const int64_t num_batches = NumBatches(batch_size, drop_remainder);
  if (batch_index < 0 || batch_index >= num_batches) {
    return absl::OutOfRangeError(absl::StrFormat(
        "batch index %d is outside [0, %d) for %d examples at batch_size %d%s", batch_index,
        num_batches, num_examples_, batch_size, drop_remainder ? " (drop_remainder)" : ""));
  }
  const std::shared_ptr<const std::vector<int64_t>> perm = Permutation(epoch);
  const int64_t begin = batch_index * batch_size;
  const int64_t end = std::min(begin + batch_size, num_examples_);
  return std::vector<int64_t>(perm->begin() + begin, perm->begin() + end);
}

absl::Status GatherBatch(const Dataset& dataset, absl::Span<const int64_t> indices,
                         float* features_out, int32_t* labels_out) {
  const int64_t dim = dataset.feature_dim;
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t idx = indices[i];
    if (idx < 0 || idx >= dataset.num_examples) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "batch position %d: example index %d is outside [0, %d)", i, idx, dataset.num_examples));
    }
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    const int64_t idx = indices[i];
    std::memcpy(features_out + i * dim, dataset.features.data() + idx * dim, dim * sizeof(float));
    labels_out[i] = dataset.labels[idx];
  }
  return absl::OkStatus();
}

}  // namespace shardps
