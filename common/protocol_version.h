// The version of shardps' wire protocol (the services and messages in proto/), which every
// RPC between shardps processes carries, so that a daemon talking to one from an
// incompatible release fails at once with an error naming both versions, never by misreading
// a message. A build speaks a range of versions, [min, current]: `current` is what it sends
// and what its messages mean, `min` the oldest peer it still serves and understands; two
// processes can talk when their ranges overlap. A change that older peers can still parse (a
// new optional field, a new RPC they never receive) raises `current` only; one they cannot
// raises `min` too, and the cluster then needs a full restart
// (docs/deploying.md#rolling-upgrades).
//
// Thread-safety: LocalProtocol is thread-safe; SetLocalProtocolForTesting is meant for
// main() before any RPC.
#ifndef SHARDPS_COMMON_PROTOCOL_VERSION_H_
#define SHARDPS_COMMON_PROTOCOL_VERSION_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

// Version 1: the protocol of the first multi-host release.
// Version 2, optional fields only: PushRequest / PushRowsRequest.base_version,
// UpdateSpec staleness_lr, delay_compensation(_adaptive), retained_versions and
// replicas_to_aggregate, PushResponse.dropped, StepResponse.own_gradient_applied, JobSpec
// own_gradient, staleness options and sync_backup_workers. A version-1 ps ignores the
// UpdateSpec options (it applies pushes as plain async or all-replica sync updates).
inline constexpr int kProtocolVersion = 2;
inline constexpr int kMinProtocolVersion = 1;

struct ProtocolRange {
  int min = kMinProtocolVersion;
  int current = kProtocolVersion;

  bool operator==(const ProtocolRange& other) const {
    return min == other.min && current == other.current;
  }
};

// This process's range: {kMinProtocolVersion, kProtocolVersion} unless a test aid changed it.
ProtocolRange LocalProtocol();
// Test aid (the daemons' and shardctl's --test_protocol_version): makes this process claim
// another range, to show what a peer of another release sees.
void SetLocalProtocolForTesting(ProtocolRange range);

// The wire form, "MIN-CURRENT" ("1-1"), as the gRPC metadata value kProtocolMetadataKey
// (rpc/protocol.h) carries it.
std::string FormatProtocolHeader(ProtocolRange range);
// Parses "MIN-CURRENT" or a single "CURRENT" (min = current). INVALID_ARGUMENT naming the
// text when it is neither, or when a version is < 1 or min > current.
absl::StatusOr<ProtocolRange> ParseProtocolHeader(absl::string_view text);

// For people: "protocol 2" or "protocol 2 (compatible back to 1)".
std::string DescribeProtocol(ProtocolRange range);

// OK when `peer` and `local` overlap; else FAILED_PRECONDITION with detail
// PROTOCOL_MISMATCH naming both, e.g. "incompatible shardps protocol: the client speaks
// protocol 3 (compatible back to 2), this ps speaks protocol 1; run the same release on
// both (docs/deploying.md#rolling-upgrades)". `peer_role` and `local_role` name the two
// sides ("the client", "this ps").
absl::Status CheckProtocolCompatible(ProtocolRange peer, ProtocolRange local,
                                     absl::string_view peer_role, absl::string_view local_role);

}  // namespace shardps

#endif  // SHARDPS_COMMON_PROTOCOL_VERSION_H_
