// Model descriptions: a multi-layer perceptron (dense + ReLU layers, softmax output) and
// the names and shapes of its parameters, as the ps stores them.
//
// Thread safety: plain values and pure functions.
#ifndef SHARDPS_MODEL_MLP_MLP_SPEC_H_
#define SHARDPS_MODEL_MLP_MLP_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

// input_dim -> hidden[0] -> ... -> hidden.back() -> num_classes, ReLU after every hidden
// layer and a softmax at the end. No hidden layers is softmax regression.
struct MlpSpec {
  int input_dim = 0;
  std::vector<int> hidden;
  int num_classes = 0;

  int num_layers() const { return static_cast<int>(hidden.size()) + 1; }
  // Layer widths: {input_dim, hidden..., num_classes}.
  std::vector<int> LayerDims() const;
};

struct ParamInfo {
  std::string name;            // "dense_<k>/kernel" or "dense_<k>/bias"
  std::vector<int64_t> shape;  // kernel: {in, out} row-major; bias: {out}

  int64_t num_elements() const;
};

// Parses "softmax" or "mlp:256,128" (hidden widths) into a spec for the given input and
// output sizes, which come from the data. INVALID_ARGUMENT names the text at fault.
absl::StatusOr<MlpSpec> ParseMlpSpec(absl::string_view text, int input_dim, int num_classes);

// "softmax" or "mlp:256,128": the inverse of ParseMlpSpec's text.
std::string MlpSpecToString(const MlpSpec& spec);

// INVALID_ARGUMENT unless every width is positive and num_classes >= 2.
absl::Status ValidateMlpSpec(const MlpSpec& spec);

// dense_0/kernel, dense_0/bias, dense_1/kernel, ...: the order in which every backend takes
// parameters and returns gradients.
std::vector<ParamInfo> Params(const MlpSpec& spec);

}  // namespace shardps

#endif  // SHARDPS_MODEL_MLP_MLP_SPEC_H_
