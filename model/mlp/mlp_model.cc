#include "model/mlp/mlp_model.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "data/batcher.h"
#include "model/mlp/mlp_compute.h"

namespace shardps {
namespace {

struct MlpBatch : public ModelBatch {
  std::vector<float> features;  // batch x input_dim
  std::vector<int32_t> labels;
};

// The compute an MlpModel makes: the MLP's compute on the device.
class MlpModelCompute final : public ModelCompute {
 public:
  explicit MlpModelCompute(std::unique_ptr<MlpCompute> compute) : compute_(std::move(compute)) {}

  std::string Name() const override { return compute_->Name(); }
  MlpCompute* compute() const { return compute_.get(); }

 private:
  const std::unique_ptr<MlpCompute> compute_;
};

class MlpModel : public Model {
 public:
  MlpModel(MlpSpec spec, const JobSpec& job) : spec_(std::move(spec)) {
    for (ParamInfo& param : Params(spec_)) {
      VariableInfo v;
      v.name = std::move(param.name);
      v.shape = std::move(param.shape);
      v.access = VariableAccess::kDense;
      // Keras' Dense: kernels from the job's initializer (glorot_uniform unless it says),
      // biases zeros.
      if (v.shape.size() == 2) {
        v.initializer = job.kernel_initializer();
      } else {
        v.initializer.set_type(InitializerSpec::ZEROS);
      }
      variables_.push_back(std::move(v));
    }
  }

  std::string ToString() const override { return MlpSpecToString(spec_); }
  const std::vector<VariableInfo>& variables() const override { return variables_; }

  absl::StatusOr<std::unique_ptr<ModelCompute>> NewCompute(
      const ComputeDevice& device) const override {
    ASSIGN_OR_RETURN(std::unique_ptr<MlpCompute> compute, NewMlpCompute(device));
    return std::unique_ptr<ModelCompute>(std::make_unique<MlpModelCompute>(std::move(compute)));
  }

  absl::Status PrepareBatch(const DataSource& data, absl::Span<const int64_t> indices,
                            StepBuffers* step) const override {
    const Dataset* dense = data.dense();
    if (dense == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("model \"", ToString(), "\" needs dense ",
                                                     "features; dataset \"", data.info().name,
                                                     "\" has none"));
    }
    if (dense->feature_dim != spec_.input_dim) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", ToString(), "\" takes ", spec_.input_dim, " features; dataset \"",
          data.info().name, "\" has ", dense->feature_dim));
    }
    SizeDenseBuffers(variables_, step);
    auto* batch = dynamic_cast<MlpBatch*>(step->batch.get());
    if (batch == nullptr) {
      step->batch = std::make_unique<MlpBatch>();
      batch = static_cast<MlpBatch*>(step->batch.get());
    }
    batch->features.resize(indices.size() * static_cast<size_t>(spec_.input_dim));
    batch->labels.resize(indices.size());
    step->batch_size = static_cast<int>(indices.size());
    return GatherBatch(*dense, indices, batch->features.data(), batch->labels.data());
  }

  absl::Status ForwardBackward(ModelCompute* compute, StepBuffers* step,
                               StepResult* out) const override {
    const MlpBatch* batch = Batch(*step);
    if (batch == nullptr) return NotPrepared();
    MlpCompute* const mlp = Mine(compute);
    if (mlp == nullptr) return NotMine(compute);
    std::vector<const float*> params;
    std::vector<float*> grads;
    for (size_t i = 0; i < variables_.size(); ++i) {
      params.push_back(step->values[i].data());
      grads.push_back(step->grads[i].data());
    }
    return mlp->ForwardBackward(spec_, params, batch->features.data(), batch->labels.data(),
                                step->batch_size, out, grads);
  }

  absl::Status Evaluate(ModelCompute* compute, const StepBuffers& step,
                        BatchEval* out) const override {
    const MlpBatch* batch = Batch(step);
    if (batch == nullptr) return NotPrepared();
    MlpCompute* const mlp = Mine(compute);
    if (mlp == nullptr) return NotMine(compute);
    out->scores.clear();
    out->labels.clear();
    std::vector<const float*> params;
    for (size_t i = 0; i < variables_.size(); ++i) params.push_back(step.values[i].data());
    return mlp->Evaluate(spec_, params, batch->features.data(), batch->labels.data(),
                         step.batch_size, &out->totals);
  }

 private:
  // The batch PrepareBatch made, with buffers for every variable; null otherwise.
  const MlpBatch* Batch(const StepBuffers& step) const {
    if (step.values.size() != variables_.size() || step.grads.size() != variables_.size()) {
      return nullptr;
    }
    return dynamic_cast<const MlpBatch*>(step.batch.get());
  }
  // The MLP's compute inside `compute`, when an MLP model made it; else null.
  static MlpCompute* Mine(ModelCompute* compute) {
    auto* mine = dynamic_cast<MlpModelCompute*>(compute);
    return mine != nullptr ? mine->compute() : nullptr;
  }
  absl::Status NotMine(const ModelCompute* compute) const {
    return absl::FailedPreconditionError(absl::StrCat(
        "model \"", ToString(), "\" needs a compute made by its NewCompute; got ",
        compute != nullptr ? absl::StrCat("\"", compute->Name(), "\"") : "none"));
  }
  static absl::Status NotPrepared() {
    return absl::FailedPreconditionError("the step's batch was not prepared for this model");
  }

  const MlpSpec spec_;
  std::vector<VariableInfo> variables_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateMlpModel(const JobSpec& job, const DatasetInfo& data) {
  absl::StatusOr<MlpSpec> spec = ParseMlpSpec(job.model(), data.feature_dim, data.num_classes);
  if (!spec.ok()) return Annotate(spec.status(), "model");
  return std::unique_ptr<Model>(std::make_unique<MlpModel>(*std::move(spec), job));
}

}  // namespace shardps
