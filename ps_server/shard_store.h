// ShardStore: the parameter-server domain. Holds float32 shards of variables with their
// optimizer slots, applies pushed gradients (async, or summed per step in SYNC mode),
// deduplicates retried requests, answers pulls (possibly after waiting for a version), and
// snapshots and restores its shards. It knows nothing of gRPC: requests and responses are the
// plain messages of proto/ps.proto, so the store is unit-tested in-process.
//
// Thread-safety: every method may be called concurrently from any thread. Requests on
// different shards proceed in parallel; a pull sees a shard before or after an update, never
// half of one. A bad request returns a non-OK status naming the shard, field or shape at
// fault and changes nothing; a request that would need more memory than the ps has fails
// with RESOURCE_EXHAUSTED (std::bad_alloc never escapes a call).
#ifndef SHARDPS_PS_SERVER_SHARD_STORE_H_
#define SHARDPS_PS_SERVER_SHARD_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/data_root.h"
#include "proto/ps.pb.h"
#include "ps_server/pulled_bytes.h"

namespace shardps {

class ShardStore {
 public:
  struct Options {
    int task_index = 0;
    // How many recent request ids each shard remembers to detect retried duplicates.
    int64_t request_id_window = 1 << 16;
    // Memory for parameters, optimizer slots and checkpoint snapshots' copies. CreateShards
    // fails (RESOURCE_EXHAUSTED, naming the variable and the bytes) past
    // memory_budget_bytes * (1 - snapshot_reserve); the reserve is left for the blocks a
    // snapshot being written makes updates copy. 0: no budget. A dynamic table without
    // max_rows counts each row in it as the row is made: a push of new keys past it fails
    // with RESOURCE_EXHAUSTED naming the table (keys that have rows still train).
    int64_t memory_budget_bytes = 0;
    double snapshot_reserve = 0.5;
    // The largest reply a pull may ask for (RESOURCE_EXHAUSTED, naming the limit, past it).
    // 0: no limit.
    int64_t max_reply_bytes = 0;
    // Where Snapshot may write and Restore may read (--data_root): a request's path outside
    // it is PERMISSION_DENIED (common/data_root.h). Default: unconfined.
    DataRoot data_root;
    // The store's incarnation (HealthResponse.incarnation); 0: drawn at random.
    uint64_t incarnation = 0;
    // Tests only: called on the snapshot writer's thread before each snapshot's file is
    // written (a test holds a snapshot's references there while it updates the shards).
    std::function<void(int64_t checkpoint_id)> before_snapshot_write;
  };

  // Completion of a request that may wait (pulls with min_version): called exactly once,
  // possibly on another thread, after the response has been filled in.
  using DoneCallback = std::function<void(const absl::Status&)>;

  static absl::StatusOr<std::unique_ptr<ShardStore>> Create(const Options& options);
  virtual ~ShardStore() = default;

  // Creates shards. A shard that exists with an identical spec is skipped (idempotent); one
  // that exists with a different spec fails the whole request (ALREADY_EXISTS) and creates
  // nothing. Specs are validated first (shape, initializer, optimizer hyperparameters).
  // A rank-0 variable (shape []) is one row of width 1. Initial values are keyed by
  // spec.variable (spec.name when empty), seed and global element index, so they do not
  // depend on the partitioning (math/initializer.h).
  virtual absl::Status CreateShards(const CreateShardsRequest& request,
                                    CreateShardsResponse* response) = 0;

  virtual absl::Status ListShards(const ListShardsRequest& request,
                                  ListShardsResponse* response) = 0;

  // Pulls a row range. When request.min_version is above the shard's version the call waits,
  // without holding the calling thread, until the version is reached (then `done(OK)`), the
  // wait times out (DEADLINE_EXCEEDED) or the store is shut down (CANCELLED).
  virtual void Pull(const PullRequest& request, PullResponse* response,
                    DoneCallback done) = 0;

  // Where a pull's bytes are when the caller sends them from the shard itself: views of the
  // shard's parameter blocks, in order, and references that keep those bytes unchanged while
  // held (an update copies a block that a pull still holds instead of writing it). Dropping
  // `holds` (on any thread) lets the blocks go.
  using PulledBytes = ::shardps::PulledBytes;
  // As Pull, but on success the response's data stays empty and its bytes are appended to
  // *in_place instead, without a copy. *in_place must live until `done` has been called.
  virtual void Pull(const PullRequest& request, PullResponse* response, PulledBytes* in_place,
                    DoneCallback done) = 0;
  // A batch of pulls (PullBatchRequest), each item as the in-place Pull above: item i's
  // version and shape go to (*responses)[i] and its bytes to (*in_place)[i] (both resized
  // to the items). Completes once every item has; the first failure is returned, naming its
  // shard. A batch whose items together would pass Options::max_reply_bytes fails at once,
  // before anything is pulled. `responses` and `in_place` must live until `done` is called.
  virtual void PullBatch(const PullBatchRequest& request, std::vector<PullResponse>* responses,
                         std::vector<PulledBytes>* in_place, DoneCallback done) = 0;
  // Rows by id. Pulls (Pull, PullBatch, PullRows) whose reply would pass
  // Options::max_reply_bytes fail at once with RESOURCE_EXHAUSTED (ErrorDetail LIMIT),
  // before any memory is allocated for them.
  virtual void PullRows(const PullRowsRequest& request, PullRowsResponse* response,
                        DoneCallback done) = 0;
  // A batch of row pulls (PullRowsBatchRequest), each item as PullRows into *responses[i]
  // (responses.size() must be the number of items; INVALID_ARGUMENT otherwise). Completes
  // once every item has; the first failure is returned, naming its shard. A batch whose
  // items together would pass Options::max_reply_bytes fails at once, before anything is
  // pulled. The responses must live until `done` is called.
  virtual void PullRowsBatch(const PullRowsBatchRequest& request,
                             absl::Span<PullRowsResponse* const> responses,
                             DoneCallback done) = 0;

  // Applies a dense gradient to a row range (ASYNC), or adds it to the step's accumulator
  // (SYNC: applied once all replicas' gradients for that step have arrived).
  //
  // Mutating requests (Push, PushRows, Assign) need a non-zero request_id; a request id the
  // shard has seen among its last Options::request_id_window successful requests is answered
  // OK with duplicate = true and changes nothing. Gradients must be finite.
  //
  // SYNC: sync.step must equal the shard's version (lower: ABORTED, a stale step; higher:
  // FAILED_PRECONDITION, wait for the version first) and sync.replica be in
  // [0, num_replicas). A replica's part of a step is either dense pushes whose row ranges
  // together cover the shard, or one PushRows. Rows a replica already sent for the step are
  // not added again (a re-run of the step by another worker): a push adding no new rows
  // answers duplicate = true. When every replica is complete the gradients are summed in
  // replica order 0..n-1 (bit-reproducible whatever the arrival order), applied once, and
  // the version advances; `applied` tells the push that completed the step.
  //
  // base_version (Push and PushRows): the shard version the gradient was computed at, 0 when
  // unknown; a negative one, or one above the shard's version, is INVALID_ARGUMENT naming the
  // shard and changes nothing. On an ASYNC shard with a staleness policy (UpdateSpec
  // staleness_lr, delay_compensation) a push with a base version is applied by that policy
  // (ps_server/staleness.h); without one, or without a base version, as is.
  //
  // SYNC with backup workers (update.replicas_to_aggregate k < n, opt-in): the step is
  // applied as soon as k replicas are complete (their sum, in replica order, times n / k);
  // a push for a step already applied (sync.step below the version), or for a replica the
  // complete step left out, is answered OK with dropped = true and changes nothing: the
  // straggler's step is done, not failed. Which k a step uses depends on arrival order and
  // is chosen by each shard on its own, so these steps are not bit-reproducible.
  virtual absl::Status Push(const PushRequest& request, PushResponse* response) = 0;
  // The same, with the gradient bytes in `data` instead of request.data() (which is ignored):
  // a batch's items point into the batch's one buffer.
  virtual absl::Status Push(const PushRequest& request, absl::string_view data,
                            PushResponse* response) = 0;
  // A batch of pushes: item i's gradient is the next data_bytes[i] bytes of request.data().
  // Applied in order; stops at the first failure and returns it (items before it stay
  // applied, and their request ids make a retry of the batch apply each once). Fails without
  // applying anything when data_bytes does not match the items or the data.
  virtual absl::Status PushBatch(const PushBatchRequest& request,
                                 PushBatchResponse* response) = 0;
  // The same, with the batch's bytes in `data` instead of request.data() (which is ignored):
  // the concatenation of its pieces, which may split floats anywhere and need not be aligned
  // (the gRPC service passes its receive slices, so a pushed batch is applied where it was
  // received, without a copy into one buffer).
  virtual absl::Status PushBatch(const PushBatchRequest& request,
                                 absl::Span<const absl::string_view> data,
                                 PushBatchResponse* response) = 0;
  // Row gradients; duplicate ids are summed (in order of appearance) before a lazy row-sparse
  // update of those rows only. Empty ids are allowed: ASYNC, nothing changes (applied =
  // false); SYNC, it completes the replica's part of the step.
  virtual absl::Status PushRows(const PushRowsRequest& request,
                                PushRowsResponse* response) = 0;
  // A batch of row pushes, each item applied as PushRows, in order; stops at the first
  // failure and returns it (the items before it stay applied, and their request ids make a
  // retry of the batch apply each once).
  virtual absl::Status PushRowsBatch(const PushRowsBatchRequest& request,
                                     PushRowsBatchResponse* response) = 0;
  // Overwrites a row range of the parameters; reset_slots returns those rows' optimizer slots
  // to their initial values (0, or Adagrad's initial_accumulator_value). The version does not
  // change.
  virtual absl::Status Assign(const AssignRequest& request, AssignResponse* response) = 0;

  // status is "SERVING", or "SHUTTING_DOWN" once Shutdown has been called; also the
  // incarnation, generation and memory figures.
  virtual void Health(HealthResponse* response) = 0;

  // Durable state and recovery (proto/ps.proto documents each request).
  //
  // Raises the store's recovery generation to request.generation() when that is higher and
  // answers the generation after. A mutating request (Push, PushRows, Assign, each PushBatch
  // item) whose non-zero generation is below the store's is refused, changing nothing:
  // ABORTED with ErrorDetail STALE_GENERATION; one above the store's: FAILED_PRECONDITION.
  virtual absl::Status SetGeneration(const SetGenerationRequest& request,
                                     SetGenerationResponse* response) = 0;
  // Removes every shard of the listed variables (every shard with `all`; neither is
  // INVALID_ARGUMENT); waiting pulls on them fail (CANCELLED), later requests NOT_FOUND, and
  // their memory returns to the budget.
  virtual absl::Status DropShards(const DropShardsRequest& request,
                                  DropShardsResponse* response) = 0;
  // Takes a snapshot of every shard (references to its copy-on-write parameter and slot
  // blocks, under each shard's lock) and answers at once with each shard's ShardInfo at the
  // cut; the file is written afterwards on a thread of the store's (ps_server/
  // snapshot_writer.h): one tensor per shard named as the shard, one per slot
  // "<shard>/<slot name>", metadata with the ps task, checkpoint id and generation.
  // FAILED_PRECONDITION when a SYNC shard has a step partly pushed (the chief cuts at step
  // boundaries), the id is still being written, or a Restore is in progress; a generation
  // other than the store's is refused as for updates (lower: ABORTED STALE_GENERATION,
  // higher: FAILED_PRECONDITION).
  virtual absl::Status Snapshot(const SnapshotRequest& request, SnapshotResponse* response) = 0;
  // WRITING, DONE (with the file's DataFileInfo), FAILED (with the error; no file is left)
  // or UNKNOWN; the statuses of the last 16 finished snapshots are kept.
  virtual absl::Status SnapshotStatus(const SnapshotStatusRequest& request,
                                      SnapshotStatusResponse* response) = 0;
  // Raises the generation first (a non-zero one below the store's is ABORTED
  // STALE_GENERATION), checks every shard of the request against the checkpoint before
  // reading anything (a missing variable, a shape or slot mismatch: FAILED_PRECONDITION),
  // then restores shard by shard (ps_server/shard_restore.h): each read whole into fresh
  // blocks and swapped in under its lock. A checksum failure is DATA_LOSS (ErrorDetail
  // CHECKPOINT_CORRUPT naming the file) and leaves that shard, and those after it, as they
  // were: restore again, from another checkpoint. Blocks while it reads (call it off the
  // serving threads); one Restore at a time.
  virtual absl::Status Restore(const RestoreRequest& request, RestoreResponse* response) = 0;

  // A checkpoint cut without a drain (ps_server/push_hold.h, HoldPushesRequest): holds the
  // pushes of steps >= request.from_step until the snapshot under the hold (Snapshot with
  // held_from_step), a release (from_step -1), a rise of the generation, Shutdown or the
  // timeout. The generation must be the store's (as for Snapshot); from_step >= 0 needs a
  // timeout_ms > 0.
  virtual absl::Status HoldPushes(const HoldPushesRequest& request,
                                  HoldPushesResponse* response) = 0;
  // One step of moving a dynamic table's buckets between its shards (MoveBucketsRequest;
  // ps_server/bucket_moves.h): NOT_FOUND for a missing shard, INVALID_ARGUMENT for a dense
  // one or a malformed request, FAILED_PRECONDITION for a table with a row budget or a step
  // the shard's state refuses; a non-zero generation must be the store's. Changes nothing
  // when it fails.
  virtual absl::Status MoveBuckets(const MoveBucketsRequest& request,
                                   MoveBucketsResponse* response) = 0;
  // Every push goes through here with its job step (PushRequest.step; none: never held):
  // `apply` (its update and its answer) runs now on the caller's thread, or, while a hold
  // covers the step, later on the hold's thread.
  virtual void AdmitPush(std::optional<int64_t> step, std::function<void()> apply) = 0;

  // Fails every waiting pull with CANCELLED and every later one too. Idempotent.
  virtual void Shutdown() = 0;
};

// The job step a push names (PushRequest.step, PushRowsRequest.step), for AdmitPush; a batch's
// is its items' highest (one step's pushes to one ps travel together).
std::optional<int64_t> JobStepOf(const PushRequest& push);
std::optional<int64_t> JobStepOf(const PushRowsRequest& push);
std::optional<int64_t> JobStepOf(const PushBatchRequest& batch);
std::optional<int64_t> JobStepOf(const PushRowsBatchRequest& batch);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_SHARD_STORE_H_
