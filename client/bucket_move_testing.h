// Test support for bucket moves (client/bucket_mover.h): the state a mover leaves when it is
// cut off part-way (its chief killed), made by hand through a PsClient.
#ifndef SHARDPS_CLIENT_BUCKET_MOVE_TESTING_H_
#define SHARDPS_CLIENT_BUCKET_MOVE_TESTING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "client/ps_client.h"
#include "client/variable_layout.h"

namespace shardps {
namespace testing {

// Moves `bucket` (at the edge of shard `from`'s range that faces shard `to`) of the table of
// `layout` as far as a mover goes before the switch: the copy and the last round, staged on
// `to`, with the source frozen for `freeze`; and with `drop`, the source's drop as well (at
// the table's next routing version), but not the target's activation.
absl::Status CutOffMove(PsClient* client, const VariableLayout& layout, int from, int to,
                        int32_t bucket, bool drop, absl::Duration freeze = absl::Minutes(1));

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_CLIENT_BUCKET_MOVE_TESTING_H_
