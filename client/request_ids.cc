#include "client/request_ids.h"

#include "absl/random/random.h"

namespace shardps {

RequestIds::RequestIds() {
  absl::BitGen gen;
  base_ = absl::Uniform<uint64_t>(gen) & ~uint64_t{0xffffffff};
}

uint64_t RequestIds::Next() { return base_ | (next_.fetch_add(1, std::memory_order_relaxed) + 1); }

uint64_t RequestIds::ForPush(const PushOptions& options, const std::string& variable,
                             const std::string& shard, int64_t row_begin) {
  if (options.idempotency_key == 0) return Next();
  // A hash that is the same in every process (absl::Hash is seeded per process): a step
  // re-run by another worker must produce the same ids for the ps to recognise it.
  uint64_t h = 14695981039346656037ull;  // FNV-1a
  auto mix = [&h](const void* data, size_t n) {
    const unsigned char* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  };
  mix(&options.idempotency_key, sizeof(options.idempotency_key));
  mix(variable.data(), variable.size() + 1);  // with the terminating NUL as a separator
  mix(shard.data(), shard.size() + 1);
  mix(&row_begin, sizeof(row_begin));
  // SplitMix64 finalizer spreads FNV's weak high bits.
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

}  // namespace shardps
