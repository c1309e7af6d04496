// The dense layers of an MLP on the CPU (Eigen), as the MLP model and the DLRM model's bottom
// and top MLPs run them over one slice of a batch: act = act(in * W + b) per layer, and the
// backward pass. Every matrix is row-major, as the ps stores it. The results do not depend on
// where a buffer lies: column sums add rows in order, whatever the alignment.
//
// Thread safety: pure functions over the caller's buffers.
#ifndef SHARDPS_MODEL_DENSE_LAYERS_CPU_H_
#define SHARDPS_MODEL_DENSE_LAYERS_CPU_H_

#include <vector>

namespace shardps {

// out[c] = sum over rows of m[r, c] (rows x cols, row-major), adding rows in order (Eigen's
// colwise().sum() groups the additions by the buffer's alignment, which would make two runs
// differ in the last bits).
void ColumnSums(const float* m, int rows, int cols, float* out);

// act_l = act(act_{l-1} * W_l + b_l) for each layer l of dims ({input, widths...}), act_0 the
// rows x dims[0] input `in`, with W_l = params[2l] (dims[l] x dims[l+1]) and b_l = params[2l+1],
// into consecutive rows x dims[l+1] blocks of acts; ReLU on every layer when relu_last, else on
// all but the last.
void DenseForward(const float* in, int rows, const std::vector<int>& dims,
                  const float* const* params, bool relu_last, float* acts);

// Backward of DenseForward (without a ReLU on the last layer). dz[0] holds the gradient of the
// last layer's pre-activation (rows x dims.back()); dz[0] and dz[1] are scratch of rows x the
// widest layer. Writes each layer's kernel and bias gradient into grads (params' order and
// shapes), and, when din is set, the gradient of the input into din (rows x dims[0]).
void DenseBackward(const float* in, int rows, const std::vector<int>& dims,
                   const float* const* params, const float* acts, float* const dz[2],
                   float* const* grads, float* din);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DENSE_LAYERS_CPU_H_
