#include "math/unique_ids.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"

namespace shardps {

bool UniqueIds(absl::Span<const int64_t> ids, int64_t rows, std::vector<int64_t>* unique,
               std::vector<uint32_t>* slot) {
  const size_t n = ids.size();
  unique->clear();
  unique->reserve(n);
  slot->resize(n);
  auto number = [&](absl::flat_hash_map<int64_t, uint32_t>* first, size_t k) {
    const auto [it, inserted] =
        first->try_emplace(ids[k], static_cast<uint32_t>(unique->size()));
    if (inserted) unique->push_back(ids[k]);
    (*slot)[k] = it->second;
  };
  if (rows <= 0 || rows / 8 > static_cast<int64_t>(n * sizeof(int64_t)) * 8) {
    absl::flat_hash_map<int64_t, uint32_t> first;
    first.reserve(n);
    for (size_t k = 0; k < n; ++k) number(&first, k);
    return unique->size() < n;
  }
  std::vector<uint64_t> bits(static_cast<size_t>((rows + 63) / 64), 0);
  std::vector<int64_t> repeated;
  for (int64_t id : ids) {
    uint64_t& word = bits[static_cast<size_t>(id >> 6)];
    const uint64_t bit = uint64_t{1} << (id & 63);
    if (word & bit) repeated.push_back(id);
    word |= bit;
  }
  if (repeated.empty()) {
    unique->assign(ids.begin(), ids.end());
    for (size_t k = 0; k < n; ++k) (*slot)[k] = static_cast<uint32_t>(k);
    return false;
  }
  // Second pass: ids that never repeat are numbered directly, repeated ones through a map.
  std::fill(bits.begin(), bits.end(), 0);
  for (int64_t id : repeated) bits[static_cast<size_t>(id >> 6)] |= uint64_t{1} << (id & 63);
  absl::flat_hash_map<int64_t, uint32_t> first;
  first.reserve(repeated.size());
  for (size_t k = 0; k < n; ++k) {
    const int64_t id = ids[k];
    if (bits[static_cast<size_t>(id >> 6)] & (uint64_t{1} << (id & 63))) {
      number(&first, k);
    } else {
      (*slot)[k] = static_cast<uint32_t>(unique->size());
      unique->push_back(id);
    }
  }
  return true;
}

}  // namespace shardps
