// Virtual buckets of a dynamic table: a 64-bit key belongs to one of a fixed
// number of buckets (thousands), and whole buckets, not keys, are placed on ps tasks, so that
// re-sharding moves buckets and never rehashes keys. The ps (ps_server/dynamic_table.h) and
// every client (client/ps_client.h) route a key by the same function.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_PARTITIONERS_BUCKETS_H_
#define SHARDPS_PARTITIONERS_BUCKETS_H_

#include <cstdint>
#include <vector>

namespace shardps {

// The default number of buckets of a dynamic table.
inline constexpr int32_t kDefaultNumBuckets = 4096;

// The bucket of `key`: splitmix64's finalizer of (uint64(key) ^ 0x2545F4914F6CDD1D), mod
// num_buckets. Fixed: the same in every process, build and release (checkpoints and
// re-sharding rely on it). REQUIRES: num_buckets > 0.
int32_t BucketOf(int64_t key, int32_t num_buckets);

// [begin, end) of a run of buckets.
struct BucketRange {
  int32_t begin = 0;
  int32_t end = 0;
  bool Contains(int32_t bucket) const { return bucket >= begin && bucket < end; }
};

// num_buckets split into num_parts contiguous ranges in order, sizes differing by at most one
// (the first num_buckets % num_parts ranges one larger), as TensorFlow's fixed_size_partitioner
// splits rows. REQUIRES: 0 < num_parts <= num_buckets.
std::vector<BucketRange> SplitBuckets(int32_t num_buckets, int32_t num_parts);

}  // namespace shardps

#endif  // SHARDPS_PARTITIONERS_BUCKETS_H_
