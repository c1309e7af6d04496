// PsInterface: a transport-neutral, asynchronous interface to ONE ps task (in the manner of
// TensorFlow's WorkerInterface). PsClient talks to every ps through it; GrpcPsInterface is
// the network implementation and LocalPsInterface calls a ShardStore in-process for tests.
//
// Each *Async call returns at once and later calls `done` exactly once, on some thread, after
// the response is filled in. The request and response must outlive that call. `deadline` is
// absolute: the call fails with DEADLINE_EXCEEDED past it.
//
// Thread-safety: implementations are thread-safe; calls may be issued concurrently.
#ifndef SHARDPS_CLIENT_PS_INTERFACE_H_
#define SHARDPS_CLIENT_PS_INTERFACE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace shardps {

using StatusCallback = std::function<void(const absl::Status&)>;

class PsInterface {
 public:
  virtual ~PsInterface() = default;

  // A name for messages: "ps:1 (localhost:2223)".
  virtual const std::string& name() const = 0;

  virtual void CreateShardsAsync(const CreateShardsRequest* request,
                                 CreateShardsResponse* response, absl::Time deadline,
                                 StatusCallback done) = 0;
  virtual void ListShardsAsync(const ListShardsRequest* request, ListShardsResponse* response,
                               absl::Time deadline, StatusCallback done) = 0;
  virtual void PullAsync(const PullRequest* request, PullResponse* response,
                         absl::Time deadline, StatusCallback done) = 0;
  virtual void PushAsync(const PushRequest* request, PushResponse* response,
                         absl::Time deadline, StatusCallback done) = 0;
  virtual void PullRowsAsync(const PullRowsRequest* request, PullRowsResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;
  virtual void PushRowsAsync(const PushRowsRequest* request, PushRowsResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;
  virtual void AssignAsync(const AssignRequest* request, AssignResponse* response,
                           absl::Time deadline, StatusCallback done) = 0;
  virtual void HealthAsync(const HealthRequest* request, HealthResponse* response,
                           absl::Time deadline, StatusCallback done) = 0;
  virtual void ShutdownAsync(const ShutdownRequest* request, ShutdownResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;

  // Durable state and recovery (proto/ps.proto documents each request).
  virtual void SetGenerationAsync(const SetGenerationRequest* request,
                                  SetGenerationResponse* response, absl::Time deadline,
                                  StatusCallback done) = 0;
  virtual void DropShardsAsync(const DropShardsRequest* request, DropShardsResponse* response,
                               absl::Time deadline, StatusCallback done) = 0;
  virtual void SnapshotAsync(const SnapshotRequest* request, SnapshotResponse* response,
                             absl::Time deadline, StatusCallback done) = 0;
  // Holds or releases the pushes of later steps for a checkpoint cut (HoldPushesRequest).
  virtual void HoldPushesAsync(const HoldPushesRequest* request, HoldPushesResponse* response,
                               absl::Time deadline, StatusCallback done) = 0;
  // One step of a dynamic table's bucket move (MoveBucketsRequest; client/bucket_mover.h).
  virtual void MoveBucketsAsync(const MoveBucketsRequest* request, MoveBucketsResponse* response,
                                absl::Time deadline, StatusCallback done) = 0;
  virtual void SnapshotStatusAsync(const SnapshotStatusRequest* request,
                                   SnapshotStatusResponse* response, absl::Time deadline,
                                   StatusCallback done) = 0;
  // May take long (it reads a checkpoint): give it a deadline to match.
  virtual void RestoreAsync(const RestoreRequest* request, RestoreResponse* response,
                            absl::Time deadline, StatusCallback done) = 0;

  // The data path: several shards' chunks per call, without intermediate copies. An
  // implementation may move the tensor bytes between the wire and the caller's memory
  // directly; these defaults issue one Pull or Push per item and copy.
  //
  // Pulls every item of `request`, writing item i's bytes into outs[i] (response->data()
  // stays empty) and its version and shape into response->pulls(i). Each outs[i] must be
  // exactly as large as the rows item i pulls: a reply of any other size fails with INTERNAL,
  // naming both sizes. `outs` (the spans and their memory) must stay alive until `done` runs.
  virtual void PullBatchAsync(const PullBatchRequest* request, PullBatchResponse* response,
                              absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                              StatusCallback done);
  // Pulls the rows of `request`, writing row i's bytes into outs[i] (response->data() stays
  // empty) and the version into response->version(). Every outs[i] has the shard's row
  // width in bytes; a reply of any other total size fails with INTERNAL, naming both sizes.
  // `outs` (the spans and their memory) must stay alive until `done` runs.
  virtual void PullRowsIntoAsync(const PullRowsRequest* request, PullRowsResponse* response,
                                 absl::Span<const absl::Span<char>> outs, absl::Time deadline,
                                 StatusCallback done);
  // Pushes every item of `request` (whose data and data_bytes are left empty), item i's
  // gradient bytes taken from data[i]. `data` (the spans and their memory) must stay alive
  // and unchanged until `done` runs.
  virtual void PushBatchAsync(const PushBatchRequest* request,
                              absl::Span<const absl::Span<const char>> data,
                              PushBatchResponse* response, absl::Time deadline,
                              StatusCallback done);
  // Several row pulls in one call (PullRowsBatchRequest): the rows of every item, in item
  // order, go into `outs`, one span per row of its shard's row width in bytes (as
  // PullRowsIntoAsync's, item after item); each item's version into response->pulls(i). A
  // reply of any other size fails with INTERNAL. `outs` must stay alive until `done` runs.
  // The default issues one PullRowsIntoAsync per item, all at once.
  virtual void PullRowsBatchIntoAsync(const PullRowsBatchRequest* request,
                                      PullRowsBatchResponse* response,
                                      absl::Span<const absl::Span<char>> outs,
                                      absl::Time deadline, StatusCallback done);
  // Several row pushes in one call (PushRowsBatchRequest), applied in order up to the first
  // failure, which is returned. The default issues one PushRowsAsync per item, in order, each
  // after the one before has succeeded (as the ps applies a batch).
  virtual void PushRowsBatchAsync(const PushRowsBatchRequest* request,
                                  PushRowsBatchResponse* response, absl::Time deadline,
                                  StatusCallback done);
};

// The number of ids of a row request (in `ids` or `ids_bytes`).
int64_t RowRequestIds(const PullRowsRequest& request);

// The error PullBatchAsync reports for a reply of the wrong size.
absl::Status PulledSizeError(const PullRequest& request, int64_t got, int64_t expected);
// The error PullRowsIntoAsync reports for a reply of the wrong size.
absl::Status PulledRowsSizeError(const PullRowsRequest& request, int64_t got, int64_t expected);

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_INTERFACE_H_
