// What every Model implementation shares: the ModelCompute that holds a model's own compute
// (and finds it again in the compute a caller hands back), the variables of a dense layer,
// and the errors for a step that was not prepared by the model or a compute it did not make.
//
// Thread safety: as model.h's: the functions are pure; an OwnedModelCompute is the compute
// it holds.
#ifndef SHARDPS_MODEL_MODEL_SUPPORT_H_
#define SHARDPS_MODEL_MODEL_SUPPORT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "model/model.h"
#include "proto/job.pb.h"

namespace shardps {

// The ModelCompute a model's NewCompute returns: its own compute (an MlpCompute, a
// DlrmCompute), whose Name() it reports.
template <typename Compute>
class OwnedModelCompute final : public ModelCompute {
 public:
  explicit OwnedModelCompute(std::unique_ptr<Compute> compute) : compute_(std::move(compute)) {}

  std::string Name() const override { return compute_->Name(); }
  Compute* compute() const { return compute_.get(); }

  // The Compute inside `compute` when an OwnedModelCompute<Compute> made by the same kind of
  // model holds it; else null.
  static Compute* Of(ModelCompute* compute) {
    auto* mine = dynamic_cast<OwnedModelCompute*>(compute);
    return mine != nullptr ? mine->compute() : nullptr;
  }

 private:
  const std::unique_ptr<Compute> compute_;
};

// A Keras Dense layer's variable, read whole: a kernel (2-D) from the job's kernel
// initializer (glorot_uniform unless the job says), a bias zeros.
VariableInfo DenseLayerVariable(std::string name, std::vector<int64_t> shape, const JobSpec& job);

// FAILED_PRECONDITION naming the model (its text) and the compute it was handed (or "none"):
// the compute was not made by the model's NewCompute.
absl::Status ComputeNotMine(absl::string_view model, const ModelCompute* compute);

// FAILED_PRECONDITION: the step's batch was not prepared for this model.
absl::Status BatchNotPrepared();

// The batch of type Batch that a PrepareBatch made in `step`, with buffers for every one of
// `variables`; else null.
template <typename Batch>
const Batch* PreparedBatch(const std::vector<VariableInfo>& variables, const StepBuffers& step) {
  if (step.values.size() != variables.size() || step.grads.size() != variables.size()) {
    return nullptr;
  }
  return dynamic_cast<const Batch*>(step.batch.get());
}
template <typename Batch>
Batch* PreparedBatch(const std::vector<VariableInfo>& variables, StepBuffers& step) {
  return const_cast<Batch*>(
      PreparedBatch<Batch>(variables, static_cast<const StepBuffers&>(step)));
}

}  // namespace shardps

#endif  // SHARDPS_MODEL_MODEL_SUPPORT_H_
