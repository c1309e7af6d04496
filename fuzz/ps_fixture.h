// What the two ps fuzz targets share: a ShardStore with a few small shards of every kind, the
// request handlers of ps_server/rpc/grpc_ps_service.cc replayed in-process (each request
// handed to the same ShardStore calls, completions awaited), and a checkpoint of the store
// written as the chief writes one, for Restore.
//
// Thread-safety: a PsFixture is used by one thread (the store's completions may arrive on
// its threads; PsFixture waits for them).
#ifndef SHARDPS_FUZZ_PS_FIXTURE_H_
#define SHARDPS_FUZZ_PS_FIXTURE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "proto/ps.pb.h"
#include "ps_server/shard_store.h"

namespace shardps {

// The fixture's shards: "dense" [8, 4] Adam ASYNC; "sync" [4, 2] SGD SYNC over 2 replicas;
// "stale" [6, 3] momentum ASYNC with the staleness policies; "scalar" [] SGD; "table" a
// dynamic table of width 4 (16 buckets, admission after 2 pushes, at most 32 rows) with
// Adagrad; "ftrl" [5, 2] FTRL with exponential decay.
std::vector<ShardSpec> FixtureShardSpecs();

class PsFixture {
 public:
  // A store with a 64 MiB budget, replies of at most 4 MiB and a window of 32 request ids,
  // holding FixtureShardSpecs(); snapshots go under `dir`, which must exist.
  explicit PsFixture(std::string dir);
  // Shuts the store down (failing the pulls still waiting) and waits for every completion.
  ~PsFixture();

  ShardStore& store() { return *store_; }
  const std::string& dir() const { return dir_; }

  // Each as the gRPC service's handler of the same name runs it: pulls in place, PushBatch
  // with its bytes in two pieces split at an odd offset (as gRPC's receive slices may split
  // them), pushes admitted through AdmitPush. A call that may wait (a pull) completes later;
  // the destructor waits for it. Successful replies are checked against their requests
  // (bytes for the rows asked; one reply item per request item).
  void Pull(const PullRequest& request);
  void PullBatch(const PullBatchRequest& request);
  void PullRows(const PullRowsRequest& request);
  void PullRowsBatch(const PullRowsBatchRequest& request);
  void Push(const PushRequest& request);
  void PushBatch(const PushBatchRequest& request);
  void PushRows(const PushRowsRequest& request);
  void PushRowsBatch(const PushRowsBatchRequest& request);
  // Snapshot's path is replaced by one under dir() (the request's own is any string).
  void Snapshot(SnapshotRequest request);

  // Snapshots the store into dir()/ckpt-<id>/ and writes its manifest.json there as the chief
  // does, for the dense shards (a dynamic table's shard needs its base checkpoints; it is left
  // out). Returns the manifest's path.
  absl::StatusOr<std::string> WriteCheckpoint(int64_t checkpoint_id, int64_t generation);

 private:
  // Runs `apply` through AdmitPush and waits for it (a held push runs when the hold ends).
  void Admit(std::optional<int64_t> step, std::function<void()> apply);
  // A completion to wait for in the destructor.
  std::shared_ptr<absl::Notification> NewPending();

  std::string dir_;
  std::unique_ptr<ShardStore> store_;
  std::vector<std::shared_ptr<absl::Notification>> pending_;
};

}  // namespace shardps

#endif  // SHARDPS_FUZZ_PS_FIXTURE_H_
