#include "model/mlp_model.h"

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/error_detail.h"
#include "data/batcher.h"

namespace shardps {
namespace {

struct MlpBatch : public ModelBatch {
  std::vector<float> features;  // batch x input_dim
  std::vector<int32_t> labels;
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
  ComputeKind compute_kind() const override { return ComputeKind::kDense; }
  const std::vector<VariableInfo>& variables() const override { return variables_; }

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

  absl::Status ForwardBackward(const ModelCompute& compute, StepBuffers* step,
                               StepResult* out) const override {
    const MlpBatch* batch = Batch(*step);
    if (batch == nullptr) return NotPrepared();
    ComputeBackend* const backend = compute.dense;
    if (backend == nullptr) return NoBackend();
    std::vector<const float*> params;
    std::vector<float*> grads;
    for (size_t i = 0; i < variables_.size(); ++i) {
      params.push_back(step->values[i].data());
      grads.push_back(step->grads[i].data());
    }
    return backend->ForwardBackward(spec_, params, batch->features.data(), batch->labels.data(),
                                    step->batch_size, out, grads);
  }

  absl::Status Evaluate(const ModelCompute& compute, const StepBuffers& step,
                        BatchEval* out) const override {
    const MlpBatch* batch = Batch(step);
    if (batch == nullptr) return NotPrepared();
    ComputeBackend* const backend = compute.dense;
    if (backend == nullptr) return NoBackend();
    out->scores.clear();
    out->labels.clear();
    std::vector<const float*> params;
    for (size_t i = 0; i < variables_.size(); ++i) params.push_back(step.values[i].data());
    return backend->Evaluate(spec_, params, batch->features.data(), batch->labels.data(),
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
  static absl::Status NoBackend() {
    return absl::FailedPreconditionError("the MLP needs a dense compute backend; none was given");
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
