// A row push's gradients with duplicate ids summed, in order of appearance, so that each row
// is updated once (and a SYNC step adds each replica's row once).
//
// Thread-safety: a pure function.
#ifndef SHARDPS_PS_SERVER_ROW_SUMS_H_
#define SHARDPS_PS_SERVER_ROW_SUMS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace shardps {

// Fills *unique_ids with the distinct ids in order of first appearance and, when some id
// repeats or `always_sum` is set, *summed with their rows (unique_ids->size() * width floats):
// a repeated id's rows of `grad` (ids.size() * width floats) added in order of appearance.
// Returns whether some id repeats. REQUIRES: every id in [0, rows), or rows <= 0: any int64.
bool SumDuplicateRows(absl::Span<const int64_t> ids, int64_t rows, const float* grad, int64_t width,
                      bool always_sum, std::vector<int64_t>* unique_ids,
                      std::vector<float>* summed);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_ROW_SUMS_H_
