#include "client/request_ids.h"

#include "absl/random/random.h"
#include "common/stable_hash.h"

namespace shardps {

RequestIds::RequestIds() {
  absl::BitGen gen;
  base_ = absl::Uniform<uint64_t>(gen) & ~uint64_t{0xffffffff};
}

uint64_t RequestIds::Next() { return base_ | (next_.fetch_add(1, std::memory_order_relaxed) + 1); }

uint64_t RequestIds::ForPush(const PushOptions& options, const std::string& variable,
                             const std::string& shard, int64_t row_begin) {
  if (options.idempotency_key == 0) return Next();
  // The same in every process: a step re-run by another worker must produce the same ids
  // for the ps to recognise it. The names with their NUL, so ("ab", "c") is not ("a", "bc").
  return StableHash()
      .AddU64(options.idempotency_key)
      .AddBytes(variable.c_str(), variable.size() + 1)
      .AddBytes(shard.c_str(), shard.size() + 1)
      .AddU64(static_cast<uint64_t>(row_begin))
      .Finish();
}

}  // namespace shardps
