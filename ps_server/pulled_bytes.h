// Where a pull's bytes are when the caller sends them from the shard itself
// (ShardStore::PulledBytes): views of the shard's parameter blocks, in order, and references
// that keep those bytes unchanged while held (an update copies a block that a pull still
// holds instead of writing it). Dropping `holds` (on any thread) lets the blocks go.
#ifndef SHARDPS_PS_SERVER_PULLED_BYTES_H_
#define SHARDPS_PS_SERVER_PULLED_BYTES_H_

#include <memory>
#include <vector>

#include "absl/strings/string_view.h"

namespace shardps {

struct PulledBytes {
  std::vector<absl::string_view> pieces;
  std::vector<std::shared_ptr<const void>> holds;
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PULLED_BYTES_H_
