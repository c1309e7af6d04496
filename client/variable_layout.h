// The layout of variables over ps tasks: what a user asks for (VariableDef), where each
// shard lives (VariableLayout), and the pure functions of the layout: placing a new
// variable's shards (dense: partitioner and placer; dynamic: one run of buckets per ps),
// rebuilding layouts from the shards the ps tasks hold (PsClient::Discover), cutting a dense
// variable into chunks, and routing row ids to their shards.
//
// Thread-safety: plain types and pure functions.
#ifndef SHARDPS_CLIENT_VARIABLE_LAYOUT_H_
#define SHARDPS_CLIENT_VARIABLE_LAYOUT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "partitioners/buckets.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "proto/ps.pb.h"

namespace shardps {

// How a dynamic table is held (ShardSpec.dynamic).
struct DynamicTableDef {
  int32_t num_buckets = kDefaultNumBuckets;
  int32_t admit_after = 0;  // a key becomes a row on its admit_after-th push (0, 1: first)
  int64_t ttl_steps = 0;    // evict rows not pushed for this many steps (0: never)
  int64_t max_rows = 0;     // rows of the whole table, split evenly over its shards (0: none)
};

// What a user asks for: a logical variable, before partitioning.
struct VariableDef {
  std::string name;
  std::vector<int64_t> shape;  // [] for a scalar; [0, dim] for a dynamic table
  InitializerSpec initializer;
  OptimizerSpec optimizer;
  UpdateSpec update;
  // Set: a dynamic table, keyed by any int64 (hashed ids) rather than row
  // indices; its rows exist once pushed. It has one shard per ps task, shard i on ps i
  // holding the i-th of SplitBuckets(num_buckets, num_ps) (partitioners/buckets.h); the
  // partitioner and placer are not consulted. Read and written by key only.
  std::optional<DynamicTableDef> dynamic;
};

// The names of the dynamic tables among `defs`, in order.
std::vector<std::string> DynamicTableNames(const std::vector<VariableDef>& defs);

// Where a variable's shards live.
struct VariableLayout {
  struct Shard {
    ShardSpec spec;
    int ps = 0;  // index into the client's ps tasks
    int64_t row_offset = 0;
    int64_t rows = 0;
    BucketRange buckets;  // a dynamic table's shard: the buckets it holds
  };
  std::string name;
  std::vector<int64_t> shape;
  int64_t rows = 0;          // shape[0], or 1 for a scalar; 0 for a dynamic table
  int64_t row_width = 0;     // elements per row
  int64_t num_elements = 0;  // 0 for a dynamic table
  // A dynamic table: keys route to the shard holding BucketOf(key, num_buckets).
  bool dynamic = false;
  int32_t num_buckets = 0;
  // A dynamic table: the routing version of its buckets' placement (the highest of its
  // shards' ShardInfo.routing_version; 0 until a bucket moved). Row pushes carry it.
  int64_t routing_version = 0;
  std::vector<Shard> shards;  // in row order (a dynamic table's: in bucket order)
};

// The layout of a variable of `shape` before its shards are known: its rows, row width and
// elements; a dynamic table's ([0, dim]) its row width only.
VariableLayout MakeLayout(const std::string& name, const std::vector<int64_t>& shape);

// INVALID_ARGUMENT naming the variable for an empty name or a dimension that is not
// positive (a dynamic table's first, 0, excepted).
absl::Status CheckVariableDef(const VariableDef& def);

// A dense variable's shards: `partitioner` splits it, `placer` places each shard (its
// counters advance); each shard's spec is appended to (*requests)[ps]. INVALID_ARGUMENT
// naming the variable when the partitioner refuses it; INTERNAL for a placer that chooses a
// ps outside [0, num_ps). REQUIRES: CheckVariableDef passed; requests->size() == num_ps.
absl::StatusOr<VariableLayout> PlaceDense(const VariableDef& def, const Partitioner& partitioner,
                                          Placer* placer, int num_ps,
                                          std::vector<CreateShardsRequest>* requests);

// A dynamic table's shards: shard i on ps i, holding the i-th run of its buckets
// (SplitBuckets), its row budget in shares of its buckets. INVALID_ARGUMENT naming the table
// for a bad shape, fewer buckets than ps tasks, or bad admission or eviction options.
absl::StatusOr<VariableLayout> PlaceDynamic(const VariableDef& def, int num_ps,
                                            std::vector<CreateShardsRequest>* requests);

// The layout of every variable of the shards listed in responses[k] (those ps task k holds),
// by name. FAILED_PRECONDITION naming the variable when its shards do not tile its rows (a
// dynamic table's: its buckets) exactly once: a ps task is missing.
absl::StatusOr<std::map<std::string, VariableLayout>> LayoutsFromShards(
    const std::vector<ListShardsResponse>& responses);

// Checks a whole-variable `what` (pull, push, assign) of `floats` values: INVALID_ARGUMENT
// for a dynamic table (no whole value) or another number of floats than the variable has.
absl::Status CheckDenseSize(const VariableLayout& layout, const char* what, size_t floats);

// Rows of `width` floats in one request of at most max_chunk_bytes (at least one).
int64_t MaxRows(int64_t width, int64_t max_chunk_bytes);

// Calls fn(shard, row_begin, row_end) for every chunk of every shard, in order, rows
// relative to the shard, each chunk at most max_chunk_bytes (and at least one row).
void ForEachChunk(
    const VariableLayout& layout, int64_t max_chunk_bytes,
    absl::FunctionRef<void(const VariableLayout::Shard& shard, int64_t row_begin, int64_t row_end)>
        fn);

// Groups ids by shard: fn(shard index, ids local to the shard, their positions in `ids`), in
// shard order, for each shard that has ids, or for every shard when `every_shard`. A dense
// variable's ids become rows of their shard (INVALID_ARGUMENT naming the id and its position
// when out of [0, rows)); a dynamic table's keys stay keys, routed by bucket.
absl::Status RouteRows(
    const VariableLayout& layout, absl::Span<const int64_t> ids, bool every_shard,
    absl::FunctionRef<void(int shard, std::vector<int64_t> local, std::vector<int64_t> positions)>
        fn);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_VARIABLE_LAYOUT_H_
