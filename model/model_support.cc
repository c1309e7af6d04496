#include "model/model_support.h"

#include "absl/strings/str_cat.h"

namespace shardps {

VariableInfo DenseLayerVariable(std::string name, std::vector<int64_t> shape, const JobSpec& job) {
  VariableInfo v;
  v.name = std::move(name);
  v.shape = std::move(shape);
  v.access = VariableAccess::kDense;
  if (v.shape.size() == 2) {
    v.initializer = job.kernel_initializer();
  } else {
    v.initializer.set_type(InitializerSpec::ZEROS);
  }
  return v;
}

absl::Status ComputeNotMine(absl::string_view model, const ModelCompute* compute) {
  return absl::FailedPreconditionError(absl::StrCat(
      "model \"", model, "\" needs a compute made by its NewCompute; got ",
      compute != nullptr ? absl::StrCat("\"", compute->Name(), "\"") : "none"));
}

absl::Status BatchNotPrepared() {
  return absl::FailedPreconditionError("the step's batch was not prepared for this model");
}

}  // namespace shardps
