#include "client/versions_seen.h"

#include <algorithm>
#include <utility>

namespace shardps {

void VersionsSeen::Add(const std::string& shard, int64_t version) {
  absl::MutexLock lock(&mu_);
  min_ = std::min(min_, version);
  max_ = std::max(max_, version);
  auto [it, inserted] = shards_.emplace(shard, version);
  if (!inserted) it->second = std::min(it->second, version);
}

void VersionsSeen::Fill(PullVersions* out) {
  absl::MutexLock lock(&mu_);
  out->min_version = min_;
  out->max_version = max_;
  out->shards = std::move(shards_);
}

}  // namespace shardps
