// Argument checks shared by the MLP's computes, so that the CPU and GPU reject the same inputs
// with the same messages.
#ifndef SHARDPS_MODEL_MLP_MLP_CHECKS_H_
#define SHARDPS_MODEL_MLP_MLP_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "model/mlp/mlp_spec.h"

namespace shardps {

// INVALID_ARGUMENT unless the spec is valid, params (and grads, when `check_grads`) hold one
// non-null pointer per Params(spec) entry, features and labels are non-null, batch > 0 and
// every label is in [0, num_classes).
absl::Status CheckMlpComputeArgs(const MlpSpec& spec, absl::Span<const float* const> params,
                                 const float* features, const int32_t* labels, int batch,
                                 bool check_grads, absl::Span<float* const> grads);

}  // namespace shardps

#endif  // SHARDPS_MODEL_MLP_MLP_CHECKS_H_
