// What process-level tests need to look at durable state from outside the daemons: a job's
// committed checkpoints, two checkpoints' models compared bit for bit whatever their
// sharding, shard versions (in a manifest, or live on the ps), and a byte of a tensor in a
// checkpoint's data file flipped on disk.
//
// Thread-safety: plain functions; use from one thread.
#ifndef SHARDPS_TESTS_CHECKPOINT_TESTING_H_
#define SHARDPS_TESTS_CHECKPOINT_TESTING_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_dir.h"
#include "client/ps_client.h"

namespace shardps {
namespace testing {

// The committed checkpoints of checkpoint directory `dir`, newest first; empty when there
// is none or the directory cannot be read. Those whose manifest is unreadable are left out.
std::vector<CommittedCheckpoint> CommittedCheckpoints(const std::string& dir);

// OK when checkpoints `a` and `b` (paths as CheckpointReader::Open takes them) hold the same
// variables, shapes and bytes: every variable's parameters and, with `with_slots`, every
// optimizer slot, read whole by rows whatever the sharding that wrote each. Otherwise an
// error naming the first difference (variable, slot, element, both values, and how many
// elements differ).
absl::Status SameModel(const std::string& a, const std::string& b, bool with_slots);

// Every shard's version recorded in a checkpoint: shard name -> version.
std::map<std::string, int64_t> ManifestShardVersions(const Manifest& manifest);

// Every variable's shard versions as the ps tasks hold them now (Discover, then a pull of
// each variable): variable -> {lowest, highest} version over its shards.
absl::StatusOr<std::map<std::string, PullVersions>> LiveVersions(PsClient* client);

// Flips every bit of the byte in the middle of tensor `tensor` of data file `file` of
// checkpoint `checkpoint` (its offsets taken from the manifest), on disk.
absl::Status FlipByteInTensor(const CommittedCheckpoint& checkpoint, const std::string& file,
                              const std::string& tensor);

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_CHECKPOINT_TESTING_H_
