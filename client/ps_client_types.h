// The plain types of PsClient's API (client/ps_client.h documents their use): its options
// (PsClient::Options), what its data calls read and write (PsClient::PullTarget, ...), what a
// pull or a push is asked for (PullOptions, PushOptions) and the versions a pull saw
// (PullVersions).
#ifndef SHARDPS_CLIENT_PS_CLIENT_TYPES_H_
#define SHARDPS_CLIENT_PS_CLIENT_TYPES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace shardps {

// How a PsClient calls its ps tasks (PsClient::Options).
struct PsClientOptions {
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
  // The job step these gradients belong to (a worker's lease), set on every request
  // (PushRequest.step): a checkpoint cut holds the pushes of steps at or above its barrier
  // until every ps has snapshotted, so training goes on through the cut. None: a push outside
  // a job's steps, never held.
  std::optional<int64_t> step;
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

// Dense whole variables (PsClient::PullAsync, PushAsync). `out` / `grad` hold num_elements
// floats, row-major.
struct PullTarget {
  std::string name;
  absl::Span<float> out;
};
struct PushSource {
  std::string name;
  absl::Span<const float> grad;
};

// Rows by id (PsClient::PullRowsManyAsync, PushRowsManyAsync): `out` / `grads` hold
// ids.size() rows.
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

}  // namespace shardps

#endif  // SHARDPS_CLIENT_PS_CLIENT_TYPES_H_
