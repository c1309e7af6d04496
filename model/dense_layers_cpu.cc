#include "model/dense_layers_cpu.h"

#include <algorithm>
#include <cstdint>

#include <Eigen/Core>

namespace shardps {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using ConstRowVectorMap = Eigen::Map<const Eigen::RowVectorXf>;

}  // namespace

void ColumnSums(const float* m, int rows, int cols, float* out) {
  std::fill(out, out + cols, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const float* row = m + static_cast<int64_t>(r) * cols;
    for (int c = 0; c < cols; ++c) out[c] += row[c];
  }
}

void DenseForward(const float* in, int rows, const std::vector<int>& dims,
                  const float* const* params, bool relu_last, float* acts) {
  const int layers = static_cast<int>(dims.size()) - 1;
  for (int l = 0; l < layers; ++l) {
    ConstMatrixMap a(in, rows, dims[l]);
    ConstMatrixMap w(params[2 * l], dims[l], dims[l + 1]);
    ConstRowVectorMap b(params[2 * l + 1], dims[l + 1]);
    MatrixMap z(acts, rows, dims[l + 1]);
    z.noalias() = a * w;
    z.rowwise() += b;
    if (relu_last || l + 1 < layers) z = z.cwiseMax(0.0f);
    in = acts;
    acts += static_cast<int64_t>(rows) * dims[l + 1];
  }
}

// dW_l = act_{l-1}^T dz, db_l = the column sums of dz, and dz_{l-1} = (dz W_l^T) masked where
// the ReLU was off.
void DenseBackward(const float* in, int rows, const std::vector<int>& dims,
                   const float* const* params, const float* acts, float* const dz[2],
                   float* const* grads, float* din) {
  const int layers = static_cast<int>(dims.size()) - 1;
  std::vector<const float*> act(layers);
  for (int l = 0; l < layers; ++l) {
    act[l] = acts;
    acts += static_cast<int64_t>(rows) * dims[l + 1];
  }
  int cur = 0;
  for (int l = layers - 1; l >= 0; --l) {
    ConstMatrixMap a(l == 0 ? in : act[l - 1], rows, dims[l]);
    ConstMatrixMap g(dz[cur], rows, dims[l + 1]);
    MatrixMap dw(grads[2 * l], dims[l], dims[l + 1]);
    dw.noalias() = a.transpose() * g;
    ColumnSums(dz[cur], rows, dims[l + 1], grads[2 * l + 1]);
    ConstMatrixMap w(params[2 * l], dims[l], dims[l + 1]);
    if (l == 0) {
      if (din != nullptr) {
        MatrixMap da(din, rows, dims[0]);
        da.noalias() = g * w.transpose();
      }
      break;
    }
    MatrixMap da(dz[1 - cur], rows, dims[l]);
    da.noalias() = g * w.transpose();
    da.array() = (a.array() > 0.0f).select(da.array(), 0.0f);
    cur = 1 - cur;
  }
}

}  // namespace shardps
