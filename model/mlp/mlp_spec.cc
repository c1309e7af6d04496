#include "model/mlp/mlp_spec.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace shardps {

std::vector<int> MlpSpec::LayerDims() const {
  std::vector<int> dims;
  dims.reserve(hidden.size() + 2);
  dims.push_back(input_dim);
  dims.insert(dims.end(), hidden.begin(), hidden.end());
  dims.push_back(num_classes);
  return dims;
}

int64_t ParamInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

absl::Status ValidateMlpSpec(const MlpSpec& spec) {
  if (spec.input_dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("model input_dim must be > 0, got ", spec.input_dim));
  }
  if (spec.num_classes < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("model num_classes must be >= 2, got ", spec.num_classes));
  }
  for (size_t i = 0; i < spec.hidden.size(); ++i) {
    if (spec.hidden[i] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model hidden layer ", i, " width must be > 0, got ", spec.hidden[i]));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<MlpSpec> ParseMlpSpec(absl::string_view text, int input_dim, int num_classes) {
  MlpSpec spec;
  spec.input_dim = input_dim;
  spec.num_classes = num_classes;
  absl::string_view rest = text;
  if (text == "softmax") {
    // No hidden layers.
  } else if (absl::ConsumePrefix(&rest, "mlp:")) {
    for (absl::string_view part : absl::StrSplit(rest, ',')) {
      int width = 0;
      if (!absl::SimpleAtoi(part, &width) || width <= 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "model \"", text, "\": hidden width \"", part, "\" is not a positive integer"));
      }
      spec.hidden.push_back(width);
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown model \"", text, "\": expected \"softmax\" or \"mlp:<width>,<width>,...\""));
  }
  if (absl::Status s = ValidateMlpSpec(spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("model \"", text, "\": ", s.message()));
  }
  return spec;
}

std::string MlpSpecToString(const MlpSpec& spec) {
  if (spec.hidden.empty()) return "softmax";
  return absl::StrCat("mlp:", absl::StrJoin(spec.hidden, ","));
}

std::vector<ParamInfo> Params(const MlpSpec& spec) {
  const std::vector<int> dims = spec.LayerDims();
  std::vector<ParamInfo> params;
  params.reserve(2 * spec.num_layers());
  for (int l = 0; l < spec.num_layers(); ++l) {
    params.push_back({absl::StrCat("dense_", l, "/kernel"), {dims[l], dims[l + 1]}});
    params.push_back({absl::StrCat("dense_", l, "/bias"), {dims[l + 1]}});
  }
  return params;
}

}  // namespace shardps
