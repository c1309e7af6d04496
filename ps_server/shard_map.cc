#include "ps_server/shard_map.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps_server/shard_spec_checks.h"

namespace shardps {

absl::Status ShardMap::NoSuchShard(absl::string_view what) const {
  return absl::NotFoundError(absl::StrCat(what, ": no such shard on ps task ", task_index_));
}

absl::StatusOr<std::shared_ptr<Shard>> ShardMap::Find(const std::string& name,
                                                      absl::string_view what) const {
  absl::MutexLock lock(&mu_);
  auto it = shards_.find(name);
  if (it == shards_.end()) return NoSuchShard(what);
  return it->second;
}

std::vector<std::shared_ptr<Shard>> ShardMap::All() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Shard>> all;
  all.reserve(shards_.size());
  for (const auto& entry : shards_) all.push_back(entry.second);
  return all;
}

absl::StatusOr<std::vector<int>> ShardMap::Absent(const CreateShardsRequest& request,
                                                  const std::vector<int>& candidates) const {
  std::vector<int> fresh;
  absl::MutexLock lock(&mu_);
  for (int i : candidates) {
    const ShardSpec& spec = request.shards(i);
    auto it = shards_.find(spec.name());
    if (it == shards_.end()) {
      fresh.push_back(i);
    } else {
      RETURN_IF_ERROR(CheckSameSpec(it->second->spec(), spec));
    }
  }
  return fresh;
}

absl::StatusOr<int> ShardMap::InsertNew(std::vector<std::shared_ptr<Shard>> built,
                                        absl::FunctionRef<void(int64_t bytes)> inserted) {
  absl::MutexLock lock(&mu_);
  for (const auto& shard : built) {
    auto it = shards_.find(shard->name());
    if (it != shards_.end()) RETURN_IF_ERROR(CheckSameSpec(it->second->spec(), shard->spec()));
  }
  int created = 0;
  for (auto& shard : built) {
    const std::string name = shard->name();
    const int64_t bytes = shard->bytes();
    if (shards_.emplace(name, std::move(shard)).second) {
      total_bytes_ += bytes;
      inserted(bytes);
      ++created;
    }
  }
  return created;
}

std::vector<std::shared_ptr<Shard>> ShardMap::Remove(
    absl::FunctionRef<bool(const ShardSpec&)> drop) {
  std::vector<std::shared_ptr<Shard>> dropped;
  absl::MutexLock lock(&mu_);
  for (auto it = shards_.begin(); it != shards_.end();) {
    if (drop(it->second->spec())) {
      total_bytes_ -= it->second->bytes();
      dropped.push_back(std::move(it->second));
      it = shards_.erase(it);
    } else {
      ++it;
    }
  }
  return dropped;
}

ShardMap::Totals ShardMap::Count() const {
  Totals totals;
  absl::MutexLock lock(&mu_);
  totals.num_shards = static_cast<int32_t>(shards_.size());
  totals.bytes = total_bytes_;
  for (const auto& [name, shard] : shards_) {
    if (shard->dynamic()) {
      totals.bytes -= shard->bytes();  // its reservation; its memory now is counted apart
      totals.dynamic.push_back(shard);
    }
  }
  return totals;
}

}  // namespace shardps
