#include "model/model.h"

namespace shardps {

int64_t VariableInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t VariableInfo::row_width() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

void SizeDenseBuffers(const std::vector<VariableInfo>& variables, StepBuffers* step) {
  const size_t n = variables.size();
  step->ids.resize(n);
  step->values.resize(n);
  step->grads.resize(n);
  for (size_t i = 0; i < n; ++i) {
    if (variables[i].access != VariableAccess::kDense) continue;
    const size_t size = static_cast<size_t>(variables[i].num_elements());
    step->ids[i].clear();
    step->values[i].resize(size);
    step->grads[i].resize(size);
  }
}

}  // namespace shardps
