// UniqueIds: numbers the distinct row ids of a PushRows in order of first appearance, so that
// duplicate ids can be summed before one update of each row.
//
// A row push of tens of thousands of random ids spent most of the ps' time in a hash map of
// every id (a fresh multi-MiB table per request, one cache miss per probe). When the shard's
// rows are few enough for a bitmap of them to be small next to the ids themselves, a bitmap
// finds the repeated ids instead, and only those go into a (small) hash map.
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
