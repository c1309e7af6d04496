// The boundary between dlrm_cuda.cc (absl, DlrmCompute) and dlrm_cuda.cu (CUDA, compiled by
// nvcc with its own host compiler): plain C++ only, no absl and no CUDA types.
#ifndef SHARDPS_MODEL_DLRM_DLRM_CUDA_INTERNAL_H_
#define SHARDPS_MODEL_DLRM_DLRM_CUDA_INTERNAL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute/cuda_context.h"

namespace shardps {
namespace dlrm_cuda {

// One table's part of a step, host pointers.
struct Table {
  int dim = 0;
  int column = 0;  // of its pooled embedding within the vectors
  bool mean = false;
  int64_t num_rows = 0;
  const float* rows = nullptr;         // num_rows x dim
  const int32_t* offsets = nullptr;    // batch + 1
  const int32_t* positions = nullptr;  // offsets[batch]
  float* row_grads = nullptr;          // num_rows x dim; unused forward only
};

// One step, host pointers, checked by the caller (dlrm_cuda.cc). Widths as in dlrm_cpu.cc.
struct Step {
  int batch = 0;
  std::vector<int> bottom_dims;  // {num_dense, bottom...}
  std::vector<int> top_dims;     // {features, top..., 1}
  int bottom_out = 0;            // width of the bottom output (0 without dense features)
  int vectors = 0;               // width of [bottom output, pooled tables]
  int features = 0;              // width of the top MLP's input
  int n = 0;                     // number of vectors (dot)
  int d = 0;                     // their dimension (dot)
  bool dot = false;
  std::vector<const float*> params;  // DlrmDenseParams order
  std::vector<int64_t> param_sizes;
  const float* dense = nullptr;   // batch x num_dense
  const float* labels = nullptr;  // batch
  std::vector<Table> tables;
  std::vector<float*> grads;  // as params; empty: forward only
  float* logits = nullptr;    // batch
  double loss_sum = 0;        // out
};

// The DLRM forward and backward on one device's context, with device buffers (grown, never
// shrunk). Not thread-safe: the caller serializes calls.
class Runner {
 public:
  explicit Runner(std::unique_ptr<cuda::Context> context);
  ~Runner();

  const std::string& device_name() const;

  // Returns "" or an error message.
  std::string Run(Step* step);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dlrm_cuda
}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_CUDA_INTERNAL_H_
