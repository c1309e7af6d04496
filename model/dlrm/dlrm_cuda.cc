#include "model/dlrm/dlrm_cuda.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "compute/cuda_device.h"
#include "model/dlrm/dlrm_cuda_internal.h"

namespace shardps {
namespace {

class DlrmCudaCompute final : public DlrmCompute {
 public:
  explicit DlrmCudaCompute(std::unique_ptr<dlrm_cuda::Runner> runner)
      : name_(absl::StrCat("gpu (", runner->device_name(), ")")), runner_(std::move(runner)) {}

  std::string Name() const override { return name_; }

  absl::Status ForwardBackward(const DlrmSpec& spec,
                               absl::Span<const absl::Span<const float>> dense_params,
                               const DlrmBatch& batch, DlrmStepOutput* out) override {
    RETURN_IF_ERROR(Check(spec, dense_params, batch));
    dlrm_cuda::Step step = MakeStep(spec, dense_params, batch);
    out->logits.resize(batch.batch);
    step.logits = out->logits.data();
    out->dense_grads.resize(dense_params.size());
    for (size_t i = 0; i < dense_params.size(); ++i) {
      out->dense_grads[i].resize(dense_params[i].size());
      step.grads.push_back(out->dense_grads[i].data());
    }
    out->row_grads.resize(spec.tables.size());
    for (size_t t = 0; t < spec.tables.size(); ++t) {
      out->row_grads[t].resize(batch.tables[t].rows.size());
      step.tables[t].row_grads = out->row_grads[t].data();
    }
    {
      absl::MutexLock lock(&mu_);
      RETURN_IF_ERROR(ToStatus(runner_->Run(&step)));
    }
    out->loss = step.loss_sum / batch.batch;
    return absl::OkStatus();
  }

  absl::Status Evaluate(const DlrmSpec& spec,
                        absl::Span<const absl::Span<const float>> dense_params,
                        const DlrmBatch& batch, DlrmEvalOutput* out) override {
    RETURN_IF_ERROR(Check(spec, dense_params, batch));
    dlrm_cuda::Step step = MakeStep(spec, dense_params, batch);
    out->probabilities.resize(batch.batch);
    step.logits = out->probabilities.data();
    {
      absl::MutexLock lock(&mu_);
      RETURN_IF_ERROR(ToStatus(runner_->Run(&step)));
    }
    for (float& p : out->probabilities) {
      p = p >= 0 ? 1.0f / (1.0f + std::exp(-p)) : std::exp(p) / (1.0f + std::exp(p));
    }
    out->loss_sum = step.loss_sum;
    out->num_examples = batch.batch;
    return absl::OkStatus();
  }

 private:
  static absl::Status Check(const DlrmSpec& spec,
                            absl::Span<const absl::Span<const float>> dense_params,
                            const DlrmBatch& batch) {
    RETURN_IF_ERROR(ValidateDlrmSpec(spec));
    RETURN_IF_ERROR(CheckDlrmDenseParams(spec, dense_params));
    return ValidateDlrmBatch(spec, batch);
  }

  static dlrm_cuda::Step MakeStep(const DlrmSpec& spec,
                                  absl::Span<const absl::Span<const float>> dense_params,
                                  const DlrmBatch& batch) {
    dlrm_cuda::Step step;
    step.batch = batch.batch;
    step.bottom_dims.push_back(spec.num_dense);
    step.bottom_dims.insert(step.bottom_dims.end(), spec.bottom.begin(), spec.bottom.end());
    step.top_dims.push_back(spec.InteractionWidth());
    step.top_dims.insert(step.top_dims.end(), spec.top.begin(), spec.top.end());
    step.top_dims.push_back(1);
    step.bottom_out = spec.BottomOutputWidth();
    step.vectors = spec.VectorsWidth();
    step.features = spec.InteractionWidth();
    step.n = spec.NumVectors();
    step.d = step.n > 0 ? step.vectors / step.n : 0;
    step.dot = spec.interaction == DlrmInteraction::kDot;
    for (const absl::Span<const float>& p : dense_params) {
      step.params.push_back(p.data());
      step.param_sizes.push_back(static_cast<int64_t>(p.size()));
    }
    step.dense = batch.dense.data();
    step.labels = batch.labels.data();
    for (size_t t = 0; t < spec.tables.size(); ++t) {
      dlrm_cuda::Table table;
      table.dim = spec.tables[t].dim;
      table.column = spec.TableColumn(static_cast<int>(t));
      table.mean = spec.tables[t].pooling == DlrmPooling::kMean;
      table.num_rows = batch.tables[t].num_rows;
      table.rows = batch.tables[t].rows.data();
      table.offsets = batch.tables[t].offsets.data();
      table.positions = batch.tables[t].positions.data();
      step.tables.push_back(table);
    }
    return step;
  }

  absl::Status ToStatus(const std::string& error) const {
    if (error.empty()) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(name_, ": ", error));
  }

  const std::string name_;
  absl::Mutex mu_;
  // The runner's stream and buffers serve one call at a time.
  const std::unique_ptr<dlrm_cuda::Runner> runner_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<DlrmCompute>> NewDlrmCudaCompute(int device) {
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::Context> context, OpenCudaContext(device));
  return std::unique_ptr<DlrmCompute>(
      new DlrmCudaCompute(std::make_unique<dlrm_cuda::Runner>(std::move(context))));
}

}  // namespace shardps
