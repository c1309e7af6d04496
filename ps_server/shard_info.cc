#include "ps_server/shard_info.h"

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace shardps {

const std::string& VariableOf(const ShardSpec& spec) {
  return spec.variable().empty() ? spec.name() : spec.variable();
}

std::string VariableAndShard(const ShardSpec& spec) {
  if (spec.variable().empty() || spec.variable() == spec.name()) return QuotedShard(spec.name());
  return absl::StrCat("variable '", spec.variable(), "' (", QuotedShard(spec.name()), ")");
}

void FillDynamicStats(const Shard& shard, ShardInfo* info) {
  if (!shard.dynamic()) return;
  DynamicTableStats stats;
  {
    absl::MutexLock lock(&shard.mu());  // a restore may replace the table
    stats = shard.table()->stats();
  }
  DynamicShardStats* d = info->mutable_dynamic();
  d->set_rows(stats.rows);
  d->set_created(stats.created);
  d->set_evicted_ttl(stats.evicted_ttl);
  d->set_evicted_budget(stats.evicted_budget);
  d->set_admission_denied(stats.admission_denied);
  d->set_index_bytes(stats.index_bytes);
  d->set_arena_bytes(stats.arena_bytes);
  info->set_bytes(stats.index_bytes + stats.arena_bytes);
}

}  // namespace shardps
