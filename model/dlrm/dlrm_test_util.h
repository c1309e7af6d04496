// Test helpers for DlrmCompute: a random model and batch that owns its buffers, and a
// double-precision reference forward pass, written independently of the implementations, for
// loss checks and finite differences.
#ifndef SHARDPS_MODEL_DLRM_DLRM_TEST_UTIL_H_
#define SHARDPS_MODEL_DLRM_DLRM_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "model/dlrm/dlrm_batch.h"
#include "model/dlrm/dlrm_spec.h"

namespace shardps {

struct DlrmProblem {
  DlrmSpec spec;
  int batch = 0;
  std::vector<std::vector<float>> params;  // DlrmDenseParams(spec) order
  std::vector<float> dense;
  std::vector<float> labels;
  std::vector<std::vector<float>> rows;  // per table, num_rows x dim
  std::vector<std::vector<int32_t>> offsets;
  std::vector<std::vector<int32_t>> positions;

  DlrmBatch View() const;
  std::vector<absl::Span<const float>> ParamSpans() const;
};

// Random parameters (Glorot-uniform kernels, small biases), dense features, labels in {0, 1},
// rows_per_table random rows per table, and per example 0..max_hotness ids per table (some
// examples have none, some repeat an id).
DlrmProblem MakeDlrmProblem(const DlrmSpec& spec, int batch, int rows_per_table,
                            int max_hotness, uint32_t seed);

// The mean log loss of the problem's batch with the given parameters and rows (in double),
// and each example's logit in *logits when set.
double ReferenceMeanLoss(const DlrmProblem& problem,
                         const std::vector<std::vector<double>>& params,
                         const std::vector<std::vector<double>>& rows,
                         std::vector<double>* logits = nullptr);

std::vector<std::vector<double>> ToDouble(const std::vector<std::vector<float>>& v);

}  // namespace shardps

#endif  // SHARDPS_MODEL_DLRM_DLRM_TEST_UTIL_H_
