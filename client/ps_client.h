// PsClient: the one library through which any process (worker, chief, evaluator, tests,
// users' own C++) talks to the ps tasks. It knows every variable's shard layout: it partitions
// and places new variables (partitioners/), or rebuilds the layout from what the ps tasks hold
// (Discover). Pulls and pushes fan out to every shard on every ps in parallel, in chunks of at
// most `max_chunk_bytes`; row ids are routed to their shards and results are stitched back in
// request order.
//
// Every call has an asynchronous form (returns at once, `done` runs exactly once on some
// thread) and a blocking wrapper. UNAVAILABLE is retried with exponential backoff under the
// same request id, so a retried push is applied once. Errors from a ps name it
// ("ps:1 (host:2223): ...") and carry a typed ErrorDetail (client/ps_call_error.h):
// PS_UNAVAILABLE after the retries, PS_STATE_LOST when a ps no longer holds a shard the layout
// places there (it restarted), or the detail the ps attached (say, STALE_GENERATION).
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
#include "client/ps_client_types.h"
#include "client/ps_interface.h"
#include "client/variable_layout.h"
#include "partitioners/buckets.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "proto/ps.pb.h"

namespace shardps {

class PsClient {
 public:
  using Options = PsClientOptions;

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
  // The shards every ps holds as it reports them (ListShards; responses[k] is ps k's), with
  // no layout built: what Discover reads, for a caller that must see shards that do not tile.
  virtual absl::Status ListShardsAll(const ListShardsRequest& request,
                                     std::vector<ListShardsResponse>* responses) = 0;

  virtual absl::StatusOr<VariableLayout> GetLayout(const std::string& name) const = 0;
  virtual std::vector<std::string> VariableNames() const = 0;

  // Dense whole variables. `out` / `grad` hold num_elements floats, row-major.
  using PullTarget = ::shardps::PullTarget;
  using PushSource = ::shardps::PushSource;
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
  using RowsPullTarget = ::shardps::RowsPullTarget;
  using RowsPushSource = ::shardps::RowsPushSource;
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
  // checkpoint (SnapshotRequest.incremental_since; 0: everything). held_from_step: the cut
  // under the hold from that step (HoldPushesAll), which each ps then ends, applying what it
  // held; a ps whose hold ended otherwise refuses it (ABORTED).
  virtual absl::Status SnapshotAll(int64_t checkpoint_id,
                                   const std::vector<std::string>& path_per_ps,
                                   int64_t generation, int64_t incremental_since,
                                   std::optional<int64_t> held_from_step,
                                   std::vector<SnapshotResponse>* responses) = 0;
  // A full snapshot, under no hold.
  absl::Status SnapshotAll(int64_t checkpoint_id, const std::vector<std::string>& path_per_ps,
                           int64_t generation, std::vector<SnapshotResponse>* responses) {
    return SnapshotAll(checkpoint_id, path_per_ps, generation, 0, std::nullopt, responses);
  }
  // Every ps holds the pushes of steps >= from_step (HoldPushesRequest) for up to `timeout`,
  // or, with from_step -1, releases what it holds.
  virtual absl::Status HoldPushesAll(int64_t generation, int64_t from_step,
                                     absl::Duration timeout) = 0;
  virtual absl::Status SnapshotStatusAll(int64_t checkpoint_id,
                                         std::vector<SnapshotStatusResponse>* responses) = 0;
  // Sends `request` to every ps, each call with Options::restore_timeout.
  virtual absl::Status RestoreAll(const RestoreRequest& request,
                                  std::vector<RestoreResponse>* responses) = 0;
  // Creates shards on ps `ps` alone (a ps added to a running job: coordinator/ps_scaling.h),
  // retried as a data call. The layouts here are not rebuilt: Discover after.
  virtual absl::Status CreateShards(int ps, const CreateShardsRequest& request,
                                    CreateShardsResponse* response) = 0;
  // One step of a dynamic table's bucket move on ps `ps` (MoveBucketsRequest; the mover is
  // client/bucket_mover.h), retried as a data call.
  virtual absl::Status MoveBuckets(int ps, const MoveBucketsRequest& request,
                                   MoveBucketsResponse* response) = 0;

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
