// UniqueIds: numbers the distinct row ids of a row push in order of first appearance, so that
// duplicate ids can be summed before one update of each row. Where the rows are few enough
// for a bitmap of them to be small next to the ids, the bitmap finds the repeated ids and only
// those go into a hash map.
//
// Thread-safety: a pure function.
#ifndef SHARDPS_MATH_UNIQUE_IDS_H_
#define SHARDPS_MATH_UNIQUE_IDS_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace shardps {

// Fills `unique` with the distinct ids in order of first appearance and `slot` with each
// id's number: (*unique)[(*slot)[k]] == ids[k]. Returns whether any id repeats.
// REQUIRES: every id is in [0, rows), or rows <= 0: any int64 (a dynamic table's keys).
bool UniqueIds(absl::Span<const int64_t> ids, int64_t rows, std::vector<int64_t>* unique,
               std::vector<uint32_t>* slot);

}  // namespace shardps

#endif  // SHARDPS_MATH_UNIQUE_IDS_H_
