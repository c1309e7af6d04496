#include "ps_server/row_sums.h"

#include <Eigen/Core>
#include <cstring>

#include "math/unique_ids.h"

namespace shardps {
namespace {

using FloatArray = Eigen::Map<Eigen::ArrayXf>;
using ConstFloatArray = Eigen::Map<const Eigen::ArrayXf>;

}  // namespace

bool SumDuplicateRows(absl::Span<const int64_t> ids, int64_t rows, const float* grad, int64_t width,
                      bool always_sum, std::vector<int64_t>* unique_ids,
                      std::vector<float>* summed) {
  std::vector<uint32_t> slot;
  const bool has_duplicates = UniqueIds(ids, rows, unique_ids, &slot);
  if (has_duplicates || always_sum) {
    summed->resize(unique_ids->size() * static_cast<size_t>(width));
    std::vector<uint8_t> seen(unique_ids->size(), 0);
    for (size_t k = 0; k < ids.size(); ++k) {
      const int64_t p = slot[k];
      float* row = summed->data() + p * width;
      const float* g = grad + static_cast<int64_t>(k) * width;
      if (!seen[p]) {
        seen[p] = 1;
        std::memcpy(row, g, static_cast<size_t>(width) * sizeof(float));
      } else {
        FloatArray(row, width) += ConstFloatArray(g, width);
      }
    }
  }
  return has_duplicates;
}

}  // namespace shardps
