// Fuzz target: every request handler of the ps (ps_server/rpc/grpc_ps_service.cc), run
// in-process against a ShardStore as the handler runs it. The input's first byte chooses the
// handler (its value modulo the number of handlers, in the order of kHandlers below); the
// rest is that handler's request message, serialized, as gRPC would receive it. A request
// that does not parse is skipped, as gRPC would refuse it. Each input gets a fresh store
// holding the fixture's shards (fuzz/ps_fixture.h), so that requests name shards that exist.
// A Restore's manifest path, when set, is replaced by a checkpoint of the fixture's shards
// written once per process; a Snapshot's path by one in a temporary directory.
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_files.h"
#include "fuzz/ps_fixture.h"
#include "proto/ps.pb.h"

namespace shardps {
namespace {

// The handlers, in the order the first byte selects them.
enum Handler {
  kCreateShards, kListShards, kPull, kPullBatch, kPullRows, kPullRowsBatch, kPush, kPushBatch,
  kPushRows, kPushRowsBatch, kAssign, kHealth, kSetGeneration, kDropShards, kSnapshot,
  kSnapshotStatus, kRestore, kHoldPushes, kMoveBuckets, kShutdown, kNumHandlers
};

template <typename Request>
bool Parse(absl::string_view bytes, Request* request) {
  return request->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// A checkpoint of the fixture's shards (each at version 0), written on first use.
const std::string& FixtureCheckpoint() {
  static const std::string* const manifest = [] {
    PsFixture fixture(FuzzTempDir());
    absl::StatusOr<std::string> path = fixture.WriteCheckpoint(1, 0);
    if (!path.ok()) {
      std::fprintf(stderr, "cannot write the fixture's checkpoint: %s\n",
                   path.status().ToString().c_str());
      std::abort();
    }
    return new std::string(*path);
  }();
  return *manifest;
}

void Run(Handler handler, absl::string_view bytes) {
  PsFixture ps(FuzzTempDir());
  ShardStore& store = ps.store();
  switch (handler) {
    case kCreateShards: {
      CreateShardsRequest request;
      CreateShardsResponse response;
      if (Parse(bytes, &request)) (void)store.CreateShards(request, &response);
      break;
    }
    case kListShards: {
      ListShardsRequest request;
      ListShardsResponse response;
      if (Parse(bytes, &request)) (void)store.ListShards(request, &response);
      break;
    }
    case kPull: {
      PullRequest request;
      if (Parse(bytes, &request)) ps.Pull(request);
      break;
    }
    case kPullBatch: {
      PullBatchRequest request;
      if (Parse(bytes, &request)) ps.PullBatch(request);
      break;
    }
    case kPullRows: {
      PullRowsRequest request;
      if (Parse(bytes, &request)) ps.PullRows(request);
      break;
    }
    case kPullRowsBatch: {
      PullRowsBatchRequest request;
      if (Parse(bytes, &request)) ps.PullRowsBatch(request);
      break;
    }
    case kPush: {
      PushRequest request;
      if (Parse(bytes, &request)) ps.Push(request);
      break;
    }
    case kPushBatch: {
      PushBatchRequest request;
      if (Parse(bytes, &request)) ps.PushBatch(request);
      break;
    }
    case kPushRows: {
      PushRowsRequest request;
      if (Parse(bytes, &request)) ps.PushRows(request);
      break;
    }
    case kPushRowsBatch: {
      PushRowsBatchRequest request;
      if (Parse(bytes, &request)) ps.PushRowsBatch(request);
      break;
    }
    case kAssign: {
      AssignRequest request;
      AssignResponse response;
      if (Parse(bytes, &request)) (void)store.Assign(request, &response);
      break;
    }
    case kHealth: {
      HealthRequest request;
      HealthResponse response;
      if (Parse(bytes, &request)) store.Health(&response);
      break;
    }
    case kSetGeneration: {
      SetGenerationRequest request;
      SetGenerationResponse response;
      if (Parse(bytes, &request)) (void)store.SetGeneration(request, &response);
      break;
    }
    case kDropShards: {
      DropShardsRequest request;
      DropShardsResponse response;
      if (Parse(bytes, &request)) (void)store.DropShards(request, &response);
      break;
    }
    case kSnapshot: {
      SnapshotRequest request;
      if (Parse(bytes, &request)) ps.Snapshot(request);
      break;
    }
    case kSnapshotStatus: {
      SnapshotStatusRequest request;
      SnapshotStatusResponse response;
      if (Parse(bytes, &request)) (void)store.SnapshotStatus(request, &response);
      break;
    }
    case kRestore: {
      RestoreRequest request;
      RestoreResponse response;
      if (!Parse(bytes, &request)) break;
      if (!request.manifest().empty()) request.set_manifest(FixtureCheckpoint());
      (void)store.Restore(request, &response);
      break;
    }
    case kHoldPushes: {
      HoldPushesRequest request;
      HoldPushesResponse response;
      if (Parse(bytes, &request)) (void)store.HoldPushes(request, &response);
      break;
    }
    case kMoveBuckets: {
      MoveBucketsRequest request;
      MoveBucketsResponse response;
      if (Parse(bytes, &request)) (void)store.MoveBuckets(request, &response);
      break;
    }
    case kShutdown: {
      ShutdownRequest request;
      if (Parse(bytes, &request)) store.Shutdown();
      break;
    }
    case kNumHandlers:
      break;
  }
}

}  // namespace
}  // namespace shardps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto handler = static_cast<shardps::Handler>(data[0] % shardps::kNumHandlers);
  shardps::Run(handler, absl::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  return 0;
}
