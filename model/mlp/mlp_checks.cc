#include "model/mlp/mlp_checks.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace shardps {

absl::Status CheckMlpComputeArgs(const MlpSpec& spec, absl::Span<const float* const> params,
                                 const float* features, const int32_t* labels, int batch,
                                 bool check_grads, absl::Span<float* const> grads) {
  RETURN_IF_ERROR(ValidateMlpSpec(spec));
  const std::vector<ParamInfo> infos = Params(spec);
  if (params.size() != infos.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", MlpSpecToString(spec), " has ",
                                                   infos.size(), " parameters, got ",
                                                   params.size(), " parameter buffers"));
  }
  if (check_grads && grads.size() != infos.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model ", MlpSpecToString(spec), " has ",
                                                   infos.size(), " parameters, got ",
                                                   grads.size(), " gradient buffers"));
  }
  for (size_t i = 0; i < infos.size(); ++i) {
    if (params[i] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", infos[i].name, " is null"));
    }
    if (check_grads && grads[i] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient buffer for ", infos[i].name, " is null"));
    }
  }
  if (batch <= 0) return absl::InvalidArgumentError(absl::StrCat("batch must be > 0, got ", batch));
  if (features == nullptr) return absl::InvalidArgumentError("features buffer is null");
  if (labels == nullptr) return absl::InvalidArgumentError("labels buffer is null");
  for (int i = 0; i < batch; ++i) {
    if (labels[i] < 0 || labels[i] >= spec.num_classes) {
      return absl::InvalidArgumentError(absl::StrCat("label ", labels[i], " at batch index ", i,
                                                     " is outside [0, ", spec.num_classes, ")"));
    }
  }
  return absl::OkStatus();
}

}  // namespace shardps
