#include "client/row_chunks.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"

namespace shardps {

std::vector<RowChunk> SplitRows(std::vector<int64_t> ids, std::vector<int64_t> positions,
                                int64_t max_rows, bool keep_duplicates_together) {
  max_rows = std::max<int64_t>(1, max_rows);
  const int64_t n = static_cast<int64_t>(ids.size());
  std::vector<RowChunk> chunks;
  if (n <= max_rows) {
    chunks.push_back(RowChunk{std::move(ids), std::move(positions)});
    return chunks;
  }
  if (!keep_duplicates_together) {
    for (int64_t begin = 0; begin < n; begin += max_rows) {
      const int64_t end = std::min(n, begin + max_rows);
      chunks.push_back(RowChunk{{ids.begin() + begin, ids.begin() + end},
                                {positions.begin() + begin, positions.begin() + end}});
    }
    return chunks;
  }
  // Occurrences of each id (indices into ids), ids in order of first appearance.
  absl::flat_hash_map<int64_t, size_t> group_of;
  std::vector<std::vector<int64_t>> groups;
  for (int64_t k = 0; k < n; ++k) {
    auto [it, added] = group_of.try_emplace(ids[k], groups.size());
    if (added) groups.emplace_back();
    groups[it->second].push_back(k);
  }
  for (const std::vector<int64_t>& group : groups) {
    const int64_t rows = static_cast<int64_t>(group.size());
    if (chunks.empty() || (!chunks.back().ids.empty() &&
                           static_cast<int64_t>(chunks.back().ids.size()) + rows > max_rows)) {
      chunks.emplace_back();
    }
    for (int64_t k : group) {
      chunks.back().ids.push_back(ids[k]);
      chunks.back().positions.push_back(positions[k]);
    }
  }
  return chunks;
}

}  // namespace shardps
