#include "partitioners/buckets.h"

namespace shardps {
namespace {

constexpr uint64_t kBucketSalt = 0x2545F4914F6CDD1DULL;

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

int32_t BucketOf(int64_t key, int32_t num_buckets) {
  return static_cast<int32_t>(Mix64(static_cast<uint64_t>(key) ^ kBucketSalt) %
                              static_cast<uint64_t>(num_buckets));
}

std::vector<BucketRange> SplitBuckets(int32_t num_buckets, int32_t num_parts) {
  std::vector<BucketRange> ranges;
  ranges.reserve(num_parts);
  const int32_t base = num_buckets / num_parts;
  const int32_t extra = num_buckets % num_parts;
  int32_t begin = 0;
  for (int32_t i = 0; i < num_parts; ++i) {
    const int32_t size = base + (i < extra ? 1 : 0);
    ranges.push_back({begin, begin + size});
    begin += size;
  }
  return ranges;
}

}  // namespace shardps
