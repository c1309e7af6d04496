// ShardMap: a ps task's shards by name, and the bytes their specs reserved. Shards are held
// by shared_ptr: a request that found one keeps it while it runs, even when a DropShards
// removes it meanwhile (the shard then says dropped() under its lock).
//
// Thread-safety: thread-safe. The map's lock is never held while a shard's lock is taken.
#ifndef SHARDPS_PS_SERVER_SHARD_MAP_H_
#define SHARDPS_PS_SERVER_SHARD_MAP_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/ps.pb.h"
#include "ps_server/shard.h"

namespace shardps {

class ShardMap {
 public:
  explicit ShardMap(int task_index) : task_index_(task_index) {}

  // NOT_FOUND: "<what>: no such shard on ps task <task_index>".
  absl::Status NoSuchShard(absl::string_view what) const;

  // The shard named `name`, or NoSuchShard(what).
  absl::StatusOr<std::shared_ptr<Shard>> Find(const std::string& name,
                                              absl::string_view what) const;
  // Every shard, in name order.
  std::vector<std::shared_ptr<Shard>> All() const;

  // Of request.shards(i) for each i in `candidates`, those that have no shard yet (their
  // indices, in order); ALREADY_EXISTS (CheckSameSpec) when one exists with another spec.
  absl::StatusOr<std::vector<int>> Absent(const CreateShardsRequest& request,
                                          const std::vector<int>& candidates) const;
  // Inserts the shards of `built` that are not here yet, all or nothing: ALREADY_EXISTS,
  // inserting none, when one exists with another spec (one with the same spec is skipped,
  // as a concurrent CreateShards made it). Calls inserted(bytes) for each shard inserted,
  // under the map's lock, and returns their number.
  absl::StatusOr<int> InsertNew(std::vector<std::shared_ptr<Shard>> built,
                                absl::FunctionRef<void(int64_t bytes)> inserted);
  // Removes the shards whose spec `drop` selects, and returns them.
  std::vector<std::shared_ptr<Shard>> Remove(absl::FunctionRef<bool(const ShardSpec&)> drop);

  // The map's figures for Health: the number of shards, the bytes reserved by every shard
  // that is not a dynamic table, and the dynamic tables (whose memory now their tables tell).
  struct Totals {
    int32_t num_shards = 0;
    int64_t bytes = 0;
    std::vector<std::shared_ptr<Shard>> dynamic;
  };
  Totals Count() const;

 private:
  const int task_index_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Shard>> shards_ ABSL_GUARDED_BY(mu_);
  int64_t total_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_MAP_H_
