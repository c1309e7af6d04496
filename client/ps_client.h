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
//
// Thread-safety: thread-safe. Layout changes (CreateVariables, Discover) may run
// concurrently with data calls on other variables.
#ifndef SHARDPS_CLIENT_PS_CLIENT_H_
#define SHARDPS_CLIENT_PS_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "client/ps_interface.h"
#include "partitioners/partitioner.h"
#include "partitioners/placement.h"
#include "proto/ps.pb.h"

namespace shardps {

// What a user asks for: a logical variable, before partitioning.
struct VariableDef {
  std::string name;
  std::vector<int64_t> shape;  // [] for a scalar
  InitializerSpec initializer;
  OptimizerSpec optimizer;
  UpdateSpec update;
};

// Where a variable's shards live.
struct VariableLayout {
  struct Shard {
    ShardSpec spec;
    int ps = 0;             // index into the client's ps tasks
    int64_t row_offset = 0;
    int64_t rows = 0;
  };
  std::string name;
  std::vector<int64_t> shape;
  int64_t rows = 0;          // shape[0], or 1 for a scalar
  int64_t row_width = 0;     // elements per row
  int64_t num_elements = 0;
  std::vector<Shard> shards;  // in row order
};

// Versions seen by a pull: the lowest and highest shard version among the shards read.
// A consistent snapshot has min_version == max_version.
struct PullVersions {
  int64_t min_version = 0;
  int64_t max_version = 0;
};

struct PushOptions {
  // For SYNC shards: the step and replica these gradients belong to.
  bool has_sync = false;
  SyncTag sync;
  // Non-zero: request ids are derived from this key (and the chunk), not drawn fresh, so a
  // re-run of the same step (by another worker, after a failure) is recognised by the ps as a
  // duplicate and not applied twice. Zero: fresh ids (a retry of one call still reuses them).
  uint64_t idempotency_key = 0;
};

struct PullOptions {
  // Wait until every shard has applied at least this many updates (see ShardStore::Pull).
  int64_t min_version = 0;
  // Give up waiting after this long; zero: wait up to the RPC deadline.
  absl::Duration wait_timeout = absl::ZeroDuration();
};

class PsClient {
 public:
  struct Options {
    absl::Duration rpc_timeout = absl::Seconds(60);
    int max_attempts = 6;  // for UNAVAILABLE
    absl::Duration initial_backoff = absl::Milliseconds(50);
    absl::Duration max_backoff = absl::Seconds(2);
    int64_t max_chunk_bytes = 4 << 20;
    // Calls of one Pull/Push in flight at once to each ps (0: all at once). Calls that run
    // together share the connections and all finish near the end, so the work each one
    // leaves for completion (the client's copy out, the ps's optimizer update) piles up at
    // the end; a window lets it overlap the next calls' transfer.
    int calls_in_flight_per_ps = 4;
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

  // Rows by id (0 .. rows-1 of the whole variable); `out` / `grads` hold ids.size() rows.
  // Duplicate ids in a push are summed on the ps.
  virtual void PullRowsAsync(const std::string& name, absl::Span<const int64_t> ids,
                             absl::Span<float> out, const PullOptions& options,
                             StatusCallback done) = 0;
  virtual void PushRowsAsync(const std::string& name, absl::Span<const int64_t> ids,
                             absl::Span<const float> grads, const PushOptions& options,
                             StatusCallback done) = 0;

  // Overwrites a whole variable.
  virtual void AssignAsync(const std::string& name, absl::Span<const float> values,
                           StatusCallback done) = 0;

  // Health of every ps, in task order (a failed call leaves a status in `errors`).
  virtual absl::Status Health(std::vector<HealthResponse>* responses) = 0;
  // Asks every ps to shut down.
  virtual absl::Status ShutdownAll(const std::string& reason) = 0;

  // Blocking wrappers.
  absl::Status Pull(const std::string& name, absl::Span<float> out,
                    const PullOptions& options = {}, PullVersions* versions = nullptr);
  absl::Status PullMany(std::vector<PullTarget> targets, const PullOptions& options = {},
                        PullVersions* versions = nullptr);
  absl::Status Push(const std::string& name, absl::Span<const float> grad,
                    const PushOptions& options = {});
  absl::Status PushMany(std::vector<PushSource> sources, const PushOptions& options = {});
  absl::Status PullRows(const std::string& name, absl::Span<const int64_t> ids,
                        absl::Span<float> out, const PullOptions& options = {});
  absl::Status PushRows(const std::string& name, absl::Span<const int64_t> ids,
                        absl::Span<const float> grads, const PushOptions& options = {});
  absl::Status Assign(const std::string& name, absl::Span<const float> values);
};

// A PsClient over gRPC to the given ps addresses (task-index order), with
// `connections_per_ps` TCP connections to each.
absl::StatusOr<std::unique_ptr<PsClient>> NewGrpcPsClient(
    const std::vector<std::string>& ps_addresses, const PsClient::Options& options,
    int connections_per_ps = 2);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_CLIENT_H_
