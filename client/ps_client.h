// PsClient: the one library through which any process (worker, chief, evaluator, tests,
// users' own C++) talks to the ps tasks. It knows the shard layout of every variable: it
// partitions and places new variables (partitioners/), or rebuilds the layout from what the
// ps tasks hold (Discover). Whole-variable pulls and pushes fan out to every shard on every ps
// in parallel, split into chunks of at most `max_chunk_bytes` so that no message approaches
// gRPC's or protobuf's size limits and large transfers are pipelined; row ids are routed to
// their shards and results are stitched back in request order.
//
// Every call has an asynchronous form (returns at once, `done` runs exactly once on some
// thread) and a blocking wrapper. Calls that fail with UNAVAILABLE are retried with
// exponential backoff, carrying the same request id, so a retried push is applied once.
// Row calls are cut into requests of at most `max_chunk_bytes` of rows as well.
//
// Errors from a ps name it ("ps:1 (host:2223): ...") and carry a typed ErrorDetail
// (client/ps_call_error.h) that survives the join of a call's parts: PS_UNAVAILABLE with the
// ps's task when it could not be reached (after the retries), PS_STATE_LOST when it no longer
// holds a shard the layout places there (it restarted), or the detail the ps attached (say,
// STALE_GENERATION). The control plane (HealthEach, SetGenerationAll, ...) is the chief's:
// one call to every ps at once, telling which ps failed.
//
// Thread-safety: thread-safe. Layout changes (CreateVariables, Discover) may run
// concurrently with data calls on other variables.
#ifndef SHARDPS_CLIENT_PS_CLIENT_H_
#define SHARDPS_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/ps_interface.h"
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
  // Set: a dynamic table (issue 10 §3), keyed by any int64 (hashed ids) rather than row
  // indices; its rows exist once pushed. It has one shard per ps task, shard i on ps i
  // holding the i-th of SplitBuckets(num_buckets, num_ps) (partitioners/buckets.h); the
  // partitioner and placer are not consulted. Read and written by key only.
  std::optional<DynamicTableDef> dynamic;
};

// Where a variable's shards live.
struct VariableLayout {
  struct Shard {
    ShardSpec spec;
    int ps = 0;             // index into the client's ps tasks
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
  std::vector<Shard> shards;  // in row order (a dynamic table's: in bucket order)
};

// Versions seen by a pull: the lowest and highest shard version among the shards read, and
// each shard's (by shard name; a shard read in several chunks: the lowest its chunks saw).
// A consistent snapshot has min_version == max_version. Pass it to the push of gradients
// computed on what was pulled (PushOptions::base_versions).
struct PullVersions {
  int64_t min_version = 0;
  int64_t max_version = 0;
  std::map<std::string, int64_t> shards;
};

struct PushOptions {
  // For SYNC shards: the step and replica these gradients belong to.
  bool has_sync = false;
  SyncTag sync;
  // Non-zero: request ids are derived from this key (and the chunk), not drawn fresh, so a
  // re-run of the same step (by another worker, after a failure) is recognised by the ps as a
  // duplicate and not applied twice. Zero: fresh ids (a retry of one call still reuses them).
  uint64_t idempotency_key = 0;
  // The recovery generation these updates belong to, set on every request the push sends
  // (PushRequest.generation, PushRowsRequest.generation): a ps that has moved to a later
  // generation (rolled back since) refuses them, ABORTED with STALE_GENERATION. 0: unfenced.
  int64_t generation = 0;
  // The versions of the pull the gradients were computed on: each request to a shard listed
  // there carries its version as base_version (PushRequest, PushRowsRequest), which an ASYNC
  // shard with a staleness policy (UpdateSpec.staleness_lr, .delay_compensation) uses;
  // shards not listed, or null: 0 (unknown). Read only while the push is issued: it need not
  // outlive the PushAsync / PushRowsAsync call.
  const PullVersions* base_versions = nullptr;
};

struct PullOptions {
  // Wait until every shard has applied at least this many updates (see ShardStore::Pull).
  int64_t min_version = 0;
  // Give up waiting after this long; zero: wait up to the RPC deadline.
  absl::Duration wait_timeout = absl::ZeroDuration();
  // Read every shard at exactly min_version (PullRequest.exact_version): a SYNC step's pulls,
  // so that a re-run of the step computes on what its first run saw.
  bool exact_version = false;
};

class PsClient {
 public:
  struct Options {
    absl::Duration rpc_timeout = absl::Seconds(60);
    int max_attempts = 6;  // for UNAVAILABLE
    absl::Duration initial_backoff = absl::Milliseconds(50);
    absl::Duration max_backoff = absl::Seconds(2);
    // The most tensor bytes in one request or reply: whole-variable pulls and pushes are cut
    // into row ranges, and row calls' ids into requests, of at most this many bytes (one row
    // at least), well below the ps's reply bound (ShardStore::Options::max_reply_bytes).
    int64_t max_chunk_bytes = 4 << 20;
    // Calls of one Pull/Push in flight at once to each ps (0: all at once). Calls that run
    // together share the connections and all finish near the end, so the work each one
    // leaves for completion (the client's copy out, the ps's optimizer update) piles up at
    // the end; a window lets it overlap the next calls' transfer.
    int calls_in_flight_per_ps = 4;
    // Deadline of each ps's Restore (RestoreAll), which reads its part of a checkpoint: GiBs
    // take long. The other control calls use rpc_timeout.
    absl::Duration restore_timeout = absl::Minutes(30);
  };

  // One PsInterface per ps task, in task-index order.
  static absl::StatusOr<std::unique_ptr<PsClient>> Create(
      std::vector<std::unique_ptr<PsInterface>> ps, const Options& options);
  virtual ~PsClient() = default;

  virtual int num_ps() const = 0;

  // Partitions each variable with `partitioner`, places its shards with `placer` (in order:
  // placement counters advance across variables, as in TensorFlow), and creates the shards
  // on every ps in parallel. Creating an identical variable again succeeds without change.
  virtual absl::Status CreateVariables(const std::vector<VariableDef>& defs,
                                       const Partitioner& partitioner, Placer* placer) = 0;

  // Rebuilds every variable's layout from the shards the ps tasks hold. Fails if a variable's
  // shards are missing or overlap.
  virtual absl::Status Discover() = 0;

  virtual absl::StatusOr<VariableLayout> GetLayout(const std::string& name) const = 0;
  virtual std::vector<std::string> VariableNames() const = 0;

  // Dense whole variables. `out` / `grad` hold num_elements floats, row-major.
  struct PullTarget {
    std::string name;
    absl::Span<float> out;
  };
  struct PushSource {
    std::string name;
    absl::Span<const float> grad;
  };
  // Pulls several variables at once; every shard chunk of every variable is in flight
  // together. `versions` (optional) receives the range of shard versions seen.
  virtual void PullAsync(std::vector<PullTarget> targets, const PullOptions& options,
                         PullVersions* versions, StatusCallback done) = 0;
  // Pushes gradients of several variables at once.
  virtual void PushAsync(std::vector<PushSource> sources, const PushOptions& options,
                         StatusCallback done) = 0;

  // Rows by id (0 .. rows-1 of the whole variable; any int64 key of a dynamic table, routed
  // by its bucket); `out` / `grads` hold ids.size() rows.
  // Duplicate ids in a push are summed here, before sending, in order of appearance (the
  // same float additions the ps would do), so each row goes out once and is updated once.
  // Each shard's ids go out in requests of at most max_chunk_bytes of rows
  // (client/row_chunks.h), ids as raw int64s (ids_bytes) to a ps that reads them; pulled rows
  // are written from the reply straight into `out` (each request is one update of its
  // shard, and advances its version). A SYNC push (has_sync) sends every shard
  // exactly one request, its whole share, even an empty one: the ps takes a replica's rows
  // for a step as one PushRows, and a shard the batch has no ids for still needs it.
  // `versions` (optional) receives the versions of the shards read, as PullAsync's.
  void PullRowsAsync(const std::string& name, absl::Span<const int64_t> ids,
                     absl::Span<float> out, const PullOptions& options, PullVersions* versions,
                     StatusCallback done) {
    PullRowsManyAsync({{name, ids, out}}, options, versions, std::move(done));
  }
  void PushRowsAsync(const std::string& name, absl::Span<const int64_t> ids,
                     absl::Span<const float> grads, const PushOptions& options,
                     StatusCallback done) {
    PushRowsManyAsync({{name, ids, grads}}, options, std::move(done));
  }
  // Rows of several tables at once, each as PullRowsAsync / PushRowsAsync would send them,
  // with the requests bound for one ps sent together: one PullRowsBatch (PushRowsBatch) per
  // ps and max_chunk_bytes, where a request per table and shard would cost a round trip and
  // gRPC's per-call work each (a step of a click model with 26 tables on 2 ps: 4 calls instead
  // of about 100). A ps of an earlier release gets one call per request. A push batch is
  // applied in order up to its first failure, which fails the call; a retry re-sends the
  // batch, and the request ids of the requests already applied keep them from applying twice.
  struct RowsPullTarget {
    std::string name;
    absl::Span<const int64_t> ids;
    absl::Span<float> out;
  };
  struct RowsPushSource {
    std::string name;
    absl::Span<const int64_t> ids;
    absl::Span<const float> grads;
  };
  virtual void PullRowsManyAsync(std::vector<RowsPullTarget> targets, const PullOptions& options,
                                 PullVersions* versions, StatusCallback done) = 0;
  virtual void PushRowsManyAsync(std::vector<RowsPushSource> sources, const PushOptions& options,
                                 StatusCallback done) = 0;

  // Overwrites a whole variable.
  virtual void AssignAsync(const std::string& name, absl::Span<const float> values,
                           StatusCallback done) = 0;

  // Health of every ps, in task order; the first failure, if any.
  virtual absl::Status Health(std::vector<HealthResponse>* responses) = 0;
  // Asks every ps to shut down.
  virtual absl::Status ShutdownAll(const std::string& reason) = 0;

  // The control plane. Each call reaches every ps task in parallel and waits for all. The
  // *All calls retry UNAVAILABLE as data calls do and return OK or the failure of the lowest
  // ps task that failed, which names that ps and carries its ErrorDetail (PS_UNAVAILABLE with
  // ps_task when the ps could not be reached, else the ps's own); responses[k] is ps k's
  // (meaningful when ps k succeeded).

  // Probes every ps once, without retries, each call with its own `timeout`: statuses[k] and
  // responses[k] are ps k's, so the caller tells which ps is down (UNAVAILABLE or
  // DEADLINE_EXCEEDED, with PS_UNAVAILABLE). `from_chief`: the chief's periodic probe, which
  // also resets each ps's orphan clock.
  virtual void HealthEach(bool from_chief, absl::Duration timeout,
                          std::vector<absl::Status>* statuses,
                          std::vector<HealthResponse>* responses) = 0;
  // Raises every ps's recovery generation to `generation` (a ps never lowers it).
  virtual absl::Status SetGenerationAll(int64_t generation) = 0;
  // Drops the listed variables' shards (every shard for request.all()) on every ps, and
  // forgets their layouts here, whatever the outcome: CreateVariables or Discover again.
  virtual absl::Status DropShardsAll(const DropShardsRequest& request) = 0;
  // Snapshots every ps for checkpoint `checkpoint_id`: ps k writes path_per_ps[k]
  // (INVALID_ARGUMENT unless there is one path per ps). `generation` must be each ps's.
  // incremental_since: dynamic tables write only their changes since that committed
  // checkpoint (SnapshotRequest.incremental_since; 0: everything).
  virtual absl::Status SnapshotAll(int64_t checkpoint_id,
                                   const std::vector<std::string>& path_per_ps,
                                   int64_t generation, int64_t incremental_since,
                                   std::vector<SnapshotResponse>* responses) = 0;
  // A full snapshot.
  absl::Status SnapshotAll(int64_t checkpoint_id, const std::vector<std::string>& path_per_ps,
                           int64_t generation, std::vector<SnapshotResponse>* responses) {
    return SnapshotAll(checkpoint_id, path_per_ps, generation, 0, responses);
  }
  virtual absl::Status SnapshotStatusAll(int64_t checkpoint_id,
                                         std::vector<SnapshotStatusResponse>* responses) = 0;
  // Sends `request` to every ps, each call with Options::restore_timeout.
  virtual absl::Status RestoreAll(const RestoreRequest& request,
                                  std::vector<RestoreResponse>* responses) = 0;

  // Blocking wrappers.
  absl::Status Pull(const std::string& name, absl::Span<float> out,
                    const PullOptions& options = {}, PullVersions* versions = nullptr);
  absl::Status PullMany(std::vector<PullTarget> targets, const PullOptions& options = {},
                        PullVersions* versions = nullptr);
  absl::Status Push(const std::string& name, absl::Span<const float> grad,
                    const PushOptions& options = {});
  absl::Status PushMany(std::vector<PushSource> sources, const PushOptions& options = {});
  absl::Status PullRows(const std::string& name, absl::Span<const int64_t> ids,
                        absl::Span<float> out, const PullOptions& options = {},
                        PullVersions* versions = nullptr);
  absl::Status PushRows(const std::string& name, absl::Span<const int64_t> ids,
                        absl::Span<const float> grads, const PushOptions& options = {});
  absl::Status PullRowsMany(std::vector<RowsPullTarget> targets, const PullOptions& options = {},
                            PullVersions* versions = nullptr);
  absl::Status PushRowsMany(std::vector<RowsPushSource> sources, const PushOptions& options = {});
  absl::Status Assign(const std::string& name, absl::Span<const float> values);
};

// A PsClient over gRPC to the given ps addresses (task-index order), with
// `connections_per_ps` TCP connections to each.
absl::StatusOr<std::unique_ptr<PsClient>> NewGrpcPsClient(
    const std::vector<std::string>& ps_addresses, const PsClient::Options& options,
    int connections_per_ps = 2);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_CLIENT_H_
