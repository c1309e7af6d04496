#include "model/mlp/mlp_model.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "common/status_macros.h"
#include "data/batcher.h"
#include "model/mlp/mlp_compute.h"
#include "model/model_support.h"

namespace shardps {
namespace {

struct MlpBatch : public ModelBatch {
  std::vector<float> features;  // batch x input_dim
  std::vector<int32_t> labels;
};

// The compute an MlpModel makes: the MLP's compute on the device.
using MlpModelCompute = OwnedModelCompute<MlpCompute>;

class MlpModel : public Model {
 public:
  MlpModel(MlpSpec spec, const JobSpec& job) : spec_(std::move(spec)) {
    for (ParamInfo& param : Params(spec_)) {
      variables_.push_back(DenseLayerVariable(std::move(param.name), std::move(param.shape), job));
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
    const MlpBatch* batch = PreparedBatch<MlpBatch>(variables_, *step);
    if (batch == nullptr) return BatchNotPrepared();
    MlpCompute* const mlp = MlpModelCompute::Of(compute);
    if (mlp == nullptr) return ComputeNotMine(ToString(), compute);
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
    const MlpBatch* batch = PreparedBatch<MlpBatch>(variables_, step);
    if (batch == nullptr) return BatchNotPrepared();
    MlpCompute* const mlp = MlpModelCompute::Of(compute);
    if (mlp == nullptr) return ComputeNotMine(ToString(), compute);
    out->scores.clear();
    out->labels.clear();
    std::vector<const float*> params;
    for (size_t i = 0; i < variables_.size(); ++i) params.push_back(step.values[i].data());
    return mlp->Evaluate(spec_, params, batch->features.data(), batch->labels.data(),
                         step.batch_size, &out->totals);
  }

 private:
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
