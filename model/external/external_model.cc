#include "model/external/external_model.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

absl::Status NotHere(absl::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat(
      "model \"external\" is computed by the user's code (shardps.Worker in shardps' Python "
      "package), not by this process: it cannot ", what));
}

class ExternalModel final : public Model {
 public:
  explicit ExternalModel(std::vector<VariableInfo> variables) : variables_(std::move(variables)) {}

  std::string ToString() const override { return kExternalModel; }
  const std::vector<VariableInfo>& variables() const override { return variables_; }

  absl::StatusOr<std::unique_ptr<ModelCompute>> NewCompute(const ComputeDevice&) const override {
    return NotHere("compute");
  }
  absl::Status PrepareBatch(const DataSource&, absl::Span<const int64_t>,
                            StepBuffers*) const override {
    return NotHere("prepare a batch");
  }
  absl::Status ForwardBackward(ModelCompute*, StepBuffers*, StepResult*) const override {
    return NotHere("run a step");
  }
  absl::Status Evaluate(ModelCompute*, const StepBuffers&, BatchEval*) const override {
    return NotHere("evaluate");
  }

 private:
  const std::vector<VariableInfo> variables_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateExternalModel(const JobSpec& job) {
  if (job.variables().empty()) {
    return absl::InvalidArgumentError("model \"external\" declares no \"variables\"");
  }
  std::vector<VariableInfo> variables;
  for (const ExternalVariable& v : job.variables()) {
    VariableInfo info;
    info.name = v.name();
    info.shape.assign(v.shape().begin(), v.shape().end());
    info.access = v.rows() ? VariableAccess::kRows : VariableAccess::kDense;
    info.dynamic = v.rows() && !info.shape.empty() && info.shape[0] == 0;
    info.initializer = v.initializer();
    variables.push_back(std::move(info));
  }
  return std::unique_ptr<Model>(new ExternalModel(std::move(variables)));
}

DatasetInfo ExternalDatasetInfo(const JobSpec& job) {
  DatasetInfo info;
  info.name = kExternalDataset;
  info.num_examples = job.examples_per_epoch();
  return info;
}

}  // namespace shardps
