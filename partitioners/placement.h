// Placement of variables and their shards on ps tasks, in the order the chief creates them.
//
// Round robin is what TensorFlow's ParameterServerStrategy does: one counter across all
// variables and shards, each placed on ps `count % num_ps`. By bytes puts each shard on the
// ps holding the fewest bytes so far, which balances memory and traffic when a few embedding
// tables dwarf the rest.
//
// A Placer is stateful and its answers depend on call order, so it is thread-compatible, not
// thread-safe: one owner (the chief, while it creates variables) calls it in creation order.
#ifndef SHARDPS_PARTITIONERS_PLACEMENT_H_
#define SHARDPS_PARTITIONERS_PLACEMENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

class Placer {
 public:
  virtual ~Placer() = default;

  // Returns the ps task index, in [0, num_ps), for the next variable or shard, which holds
  // `shard_bytes` bytes (a negative value counts as 0).
  virtual int Place(int64_t shard_bytes) = 0;

  // E.g. "RoundRobinPlacer(num_ps=2, placed=3)".
  virtual std::string DebugString() const = 0;
};

// TensorFlow's ParameterServerStrategy placement: the n-th shard placed (counting every
// shard of every variable, and each unsplit variable as one) goes to ps n % num_ps.
absl::StatusOr<std::unique_ptr<Placer>> NewRoundRobinPlacer(int num_ps);

// Each shard goes to the ps holding the fewest bytes so far; ties go to the lowest index.
absl::StatusOr<std::unique_ptr<Placer>> NewByBytesPlacer(int num_ps);

// "round_robin" or "by_bytes". INVALID_ARGUMENT for another spec or num_ps < 1.
absl::StatusOr<std::unique_ptr<Placer>> ParsePlacement(absl::string_view spec, int num_ps);

}  // namespace shardps

#endif  // SHARDPS_PARTITIONERS_PLACEMENT_H_
