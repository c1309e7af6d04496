// A ShardStore that counts what passes through it into Prometheus metrics (metrics/registry.h)
// and forwards every call to the store it wraps:
//   shardps_ps_pulls_total{variable}, shardps_ps_pushes_total{variable}: items (a batch's
//     items each count), pulls and pushes of rows alike;
//   shardps_ps_updates_applied_total{variable}, shardps_ps_updates_rejected_total{variable}:
//     pushes by their outcome (a batch's items take the batch's);
//   shardps_ps_push_staleness{variable}: a histogram of the updates applied to a shard between
//     the version a push's gradient was computed at (its base_version) and the push;
//   shardps_ps_request_seconds{rpc}: each call's time in the store, from the call to its
//     completion (a pull that waits for a version counts its wait);
// and, read at scrape from ListShards and Health:
//   shardps_ps_variable_bytes{variable}, shardps_ps_variable_rows{variable},
//   shardps_ps_variable_version{variable} (the highest of its shards'), shardps_ps_shards,
//   shardps_ps_memory_budget_bytes, shardps_ps_memory_used_bytes (the shards' bytes),
//   shardps_ps_memory_available_bytes (what CreateShards may still allocate).
// A variable is a shard's ShardSpec.variable ("{variable}/part_{i}" less its part); label
// values are bounded (Registry::kDefaultMaxSeries, then "_other").
//
// The data path pays no lock: each thread keeps its own map from shard name to the shard's
// counters (filled once per shard and thread, under the store's mutex), and the counters are
// metrics/registry.h's striped ones.
//
// Thread-safety: as ShardStore (every method from any thread). `registry` must outlive the
// store, and the store must outlive every scrape of `registry` (Daemon::StopMetrics first).
#ifndef SHARDPS_PS_SERVER_METERED_STORE_H_
#define SHARDPS_PS_SERVER_METERED_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "metrics/registry.h"
#include "ps_server/shard_store.h"

namespace shardps {

// INVALID_ARGUMENT when the registry already holds one of the names with another type.
absl::StatusOr<std::unique_ptr<ShardStore>> NewMeteredStore(std::unique_ptr<ShardStore> store,
                                                            metrics::Registry* registry);

// The variable of shard `name`: "emb/part_3" -> "emb", "w" -> "w".
std::string VariableOfShard(const std::string& name);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_METERED_STORE_H_
