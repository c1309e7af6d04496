// CUDA kernels that more than one model's CUDA compute runs, each behind a launcher on a
// stream: a layer's bias and activation, the ReLU's backward, and a bias gradient's column
// sums in a fixed order. A launch is asynchronous; its error shows at the stream's next
// cudaGetLastError. Plain C++ without CUDA headers, like cuda_context.h.
//
// Thread safety: the launchers are thread-safe; a stream orders the work queued on it.
#ifndef SHARDPS_COMPUTE_CUDA_KERNELS_H_
#define SHARDPS_COMPUTE_CUDA_KERNELS_H_

#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace shardps {
namespace cuda {

// Threads per block of the grid-stride kernels here, and GridFor's unit.
constexpr int kThreadsPerBlock = 256;

// Blocks of kThreadsPerBlock for a grid-stride loop over n elements: at least 1, at most 8192.
int GridFor(int64_t n);

// z[r, c] = act(z[r, c] + b[c]) over a rows x cols row-major z, act ReLU when `relu`, else
// the identity.
void LaunchBiasActivation(float* z, const float* b, int rows, int cols, bool relu,
                          CUstream_st* stream);

// da[i] = 0 wherever the ReLU output a[i] is not positive, for i in [0, n).
void LaunchReluGrad(float* da, const float* a, int64_t n, CUstream_st* stream);

// out[c] = sum over rows of m[r, c] (a bias gradient) for a rows x cols row-major m: per
// column, 8 row-strided partial sums, then added in a fixed order, so that the result does
// not change from run to run.
void LaunchColumnSums(const float* m, int rows, int cols, float* out, CUstream_st* stream);

}  // namespace cuda
}  // namespace shardps

#endif  // SHARDPS_COMPUTE_CUDA_KERNELS_H_
