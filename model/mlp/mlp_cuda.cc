#include "model/mlp/mlp_cuda.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "compute/cuda_device.h"
#include "model/mlp/mlp_checks.h"
#include "model/mlp/mlp_cuda_internal.h"

namespace shardps {
namespace {

class MlpCudaCompute final : public MlpCompute {
 public:
  explicit MlpCudaCompute(std::unique_ptr<mlp_cuda::Runner> runner)
      : name_(absl::StrCat("gpu (", runner->device_name(), ")")), runner_(std::move(runner)) {}

  std::string Name() const override { return name_; }

  absl::Status ForwardBackward(const MlpSpec& spec, absl::Span<const float* const> params,
                               const float* features, const int32_t* labels, int batch,
                               StepResult* out, absl::Span<float* const> grads) override {
    RETURN_IF_ERROR(CheckMlpComputeArgs(spec, params, features, labels, batch, true, grads));
    double loss_sum = 0;
    int64_t correct = 0;
    {
      absl::MutexLock lock(&mu_);
      RETURN_IF_ERROR(ToStatus(runner_->Run(spec.LayerDims(), params.data(), features, labels,
                                            batch, grads.data(), &loss_sum, &correct)));
    }
    out->loss = static_cast<float>(loss_sum / batch);
    out->correct = correct;
    return absl::OkStatus();
  }

  absl::Status Evaluate(const MlpSpec& spec, absl::Span<const float* const> params,
                        const float* features, const int32_t* labels, int batch,
                        EvalResult* out) override {
    RETURN_IF_ERROR(CheckMlpComputeArgs(spec, params, features, labels, batch, false, {}));
    double loss_sum = 0;
    int64_t correct = 0;
    {
      absl::MutexLock lock(&mu_);
      RETURN_IF_ERROR(ToStatus(runner_->Run(spec.LayerDims(), params.data(), features, labels,
                                            batch, nullptr, &loss_sum, &correct)));
    }
    out->loss_sum = loss_sum;
    out->correct = correct;
    out->num_examples = batch;
    return absl::OkStatus();
  }

 private:
  absl::Status ToStatus(const std::string& error) const {
    if (error.empty()) return absl::OkStatus();
    return absl::InternalError(absl::StrCat(name_, ": ", error));
  }

  const std::string name_;
  absl::Mutex mu_;
  // The runner's stream and buffers serve one call at a time.
  const std::unique_ptr<mlp_cuda::Runner> runner_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace

absl::StatusOr<std::unique_ptr<MlpCompute>> NewMlpCudaCompute(int device) {
  ASSIGN_OR_RETURN(std::unique_ptr<cuda::Context> context, OpenCudaContext(device));
  return std::unique_ptr<MlpCompute>(
      new MlpCudaCompute(std::make_unique<mlp_cuda::Runner>(std::move(context))));
}

}  // namespace shardps
