#include "model/dlrm/dlrm_model.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "data/ctr/ctr_batch.h"
#include "model/dlrm/dlrm_batch.h"
#include "model/dlrm/dlrm_compute.h"
#include "model/dlrm/dlrm_spec.h"
#include "model/model_support.h"

namespace shardps {
namespace {

// A prepared batch: the examples, each table's deduplicated ids, and the compute's outputs
// (kept so that their buffers are reused from step to step).
struct DlrmModelBatch : public ModelBatch {
  CtrBatch examples;
  std::vector<DedupedIds> tables;
  std::vector<int32_t> offsets;  // scratch: one table's offsets as int32
  DlrmStepOutput out;
};

// The compute a DlrmModel makes: the DLRM compute on the device.
using DlrmModelCompute = OwnedModelCompute<DlrmCompute>;

class DlrmModel : public Model {
 public:
  DlrmModel(DlrmSpec spec, const JobSpec& job) : spec_(std::move(spec)) {
    for (DlrmParamInfo& param : DlrmDenseParams(spec_)) {
      variables_.push_back(DenseLayerVariable(std::move(param.name), std::move(param.shape), job));
    }
    num_dense_params_ = variables_.size();
    for (const DlrmTableSpec& table : spec_.tables) {
      VariableInfo v;
      v.name = absl::StrCat("embedding/", table.name);
      v.shape = {table.vocab_size, table.dim};  // [0, dim]: a dynamic table, keyed by hash
      v.access = VariableAccess::kRows;
      v.dynamic = table.vocab_size == 0;
      v.initializer.set_type(InitializerSpec::RANDOM_UNIFORM);
      v.initializer.set_minval(-0.05);
      v.initializer.set_maxval(0.05);
      v.initializer.set_seed(job.seed());
      variables_.push_back(std::move(v));
    }
  }

  std::string ToString() const override { return DlrmSpecToString(spec_); }
  const std::vector<VariableInfo>& variables() const override { return variables_; }

  absl::StatusOr<std::unique_ptr<ModelCompute>> NewCompute(
      const ComputeDevice& device) const override {
    ASSIGN_OR_RETURN(std::unique_ptr<DlrmCompute> compute, NewDlrmCompute(device));
    return std::unique_ptr<ModelCompute>(std::make_unique<DlrmModelCompute>(std::move(compute)));
  }

  absl::Status PrepareBatch(const DataSource& data, absl::Span<const int64_t> indices,
                            StepBuffers* step) const override {
    const CtrSource* source = data.ctr();
    if (source == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", ToString(), "\" needs click-log data; dataset \"", data.info().name,
          "\" is not"));
    }
    const CtrSchema& schema = source->schema();
    if (schema.num_dense != spec_.num_dense || schema.features.size() != spec_.tables.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "model \"", ToString(), "\" takes ", spec_.num_dense, " dense and ",
          spec_.tables.size(), " categorical features; dataset \"", data.info().name, "\" has ",
          schema.num_dense, " and ", schema.features.size()));
    }
    SizeDenseBuffers(variables_, step);
    auto* batch = dynamic_cast<DlrmModelBatch*>(step->batch.get());
    if (batch == nullptr) {
      step->batch = std::make_unique<DlrmModelBatch>();
      batch = static_cast<DlrmModelBatch*>(step->batch.get());
    }
    RETURN_IF_ERROR(source->Read(indices, &batch->examples));
    step->batch_size = static_cast<int>(indices.size());
    batch->tables.resize(spec_.tables.size());
    for (size_t t = 0; t < spec_.tables.size(); ++t) {
      const CtrFeatureIds& ids = batch->examples.features[t];
      batch->offsets.resize(ids.offsets.size());
      for (size_t i = 0; i < ids.offsets.size(); ++i) {
        if (ids.offsets[i] > std::numeric_limits<int32_t>::max()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "table \"", spec_.tables[t].name, "\": more than 2^31 ids in one batch"));
        }
        batch->offsets[i] = static_cast<int32_t>(ids.offsets[i]);
      }
      DedupedIds& dedup = batch->tables[t];
      RETURN_IF_ERROR(DedupIds(batch->offsets, ids.ids, &dedup));
      const size_t v = num_dense_params_ + t;
      step->ids[v].assign(dedup.unique_ids.begin(), dedup.unique_ids.end());
      const size_t floats = dedup.unique_ids.size() * static_cast<size_t>(spec_.tables[t].dim);
      step->values[v].resize(floats);
      step->grads[v].resize(floats);
    }
    return absl::OkStatus();
  }

  absl::Status ForwardBackward(ModelCompute* compute, StepBuffers* step,
                               StepResult* out) const override {
    auto* batch = PreparedBatch<DlrmModelBatch>(variables_, *step);
    if (batch == nullptr) return BatchNotPrepared();
    DlrmCompute* const dlrm = DlrmModelCompute::Of(compute);
    if (dlrm == nullptr) return ComputeNotMine(ToString(), compute);
    std::vector<absl::Span<const float>> params;
    DlrmBatch view;
    MakeView(*step, *batch, &params, &view);
    RETURN_IF_ERROR(dlrm->ForwardBackward(spec_, params, view, &batch->out));
    // The gradients go to the step's buffers by swapping: both sides keep their storage.
    for (size_t i = 0; i < num_dense_params_; ++i) step->grads[i].swap(batch->out.dense_grads[i]);
    for (size_t t = 0; t < spec_.tables.size(); ++t) {
      step->grads[num_dense_params_ + t].swap(batch->out.row_grads[t]);
    }
    out->loss = static_cast<float>(batch->out.loss);
    out->correct = 0;
    for (int i = 0; i < step->batch_size; ++i) {
      out->correct += (batch->out.logits[i] >= 0) == (batch->examples.labels[i] >= 0.5f);
    }
    return absl::OkStatus();
  }

  absl::Status Evaluate(ModelCompute* compute, const StepBuffers& step,
                        BatchEval* out) const override {
    const DlrmModelBatch* batch = PreparedBatch<DlrmModelBatch>(variables_, step);
    if (batch == nullptr) return BatchNotPrepared();
    DlrmCompute* const dlrm = DlrmModelCompute::Of(compute);
    if (dlrm == nullptr) return ComputeNotMine(ToString(), compute);
    std::vector<absl::Span<const float>> params;
    DlrmBatch view;
    MakeView(step, *batch, &params, &view);
    DlrmEvalOutput eval;
    RETURN_IF_ERROR(dlrm->Evaluate(spec_, params, view, &eval));
    out->totals.loss_sum = eval.loss_sum;
    out->totals.num_examples = eval.num_examples;
    out->totals.correct = 0;
    out->labels.assign(batch->examples.labels.begin(), batch->examples.labels.end());
    out->scores = std::move(eval.probabilities);
    for (size_t i = 0; i < out->scores.size(); ++i) {
      out->totals.correct += (out->scores[i] >= 0.5f) == (out->labels[i] >= 0.5f);
    }
    return absl::OkStatus();
  }

 private:
  void MakeView(const StepBuffers& step, const DlrmModelBatch& batch,
                std::vector<absl::Span<const float>>* params, DlrmBatch* view) const {
    for (size_t i = 0; i < num_dense_params_; ++i) params->emplace_back(step.values[i]);
    view->batch = step.batch_size;
    view->dense = batch.examples.dense;
    view->labels = batch.examples.labels;
    view->tables.clear();
    for (size_t t = 0; t < spec_.tables.size(); ++t) {
      view->tables.push_back(TableBatchView(batch.tables[t], step.values[num_dense_params_ + t]));
    }
  }

  const DlrmSpec spec_;
  std::vector<VariableInfo> variables_;  // dense parameters, then one table per feature
  size_t num_dense_params_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> CreateDlrmModel(const JobSpec& job, const DatasetInfo& data) {
  if (data.ctr == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("model \"", job.model(),
                                                   "\" needs click-log data; dataset \"",
                                                   data.name, "\" is not"));
  }
  std::vector<DlrmTableSchema> tables;
  for (const CtrFeature& f : data.ctr->features) {
    tables.push_back({f.name, f.vocab_size});  // 0: unbounded hashed ids, a dynamic table
  }
  const std::string text = job.model() == kDlrmPrefix ? absl::StrCat(kDlrmPrefix, ":") : job.model();
  absl::StatusOr<DlrmSpec> spec = ParseDlrmSpec(text, data.ctr->num_dense, tables);
  if (!spec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("model \"", job.model(), "\": ", spec.status().message()));
  }
  return std::unique_ptr<Model>(std::make_unique<DlrmModel>(*std::move(spec), job));
}

}  // namespace shardps
