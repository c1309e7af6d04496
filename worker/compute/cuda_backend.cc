#include "worker/compute/cuda_backend.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "worker/compute/backend_checks.h"
#include "worker/compute/cuda_backend_internal.h"

namespace shardps {
namespace {

class CudaBackend final : public ComputeBackend {
 public:
  explicit CudaBackend(std::unique_ptr<cuda_internal::MlpRunner> runner)
      : name_(absl::StrCat("gpu (", runner->device_name(), ")")), runner_(std::move(runner)) {}

  std::string Name() const override { return name_; }

  absl::Status ForwardBackward(const MlpSpec& spec, absl::Span<const float* const> params,
                               const float* features, const int32_t* labels, int batch,
                               StepResult* out, absl::Span<float* const> grads) override {
    RETURN_IF_ERROR(CheckComputeArgs(spec, params, features, labels, batch, true, grads));
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
    RETURN_IF_ERROR(CheckComputeArgs(spec, params, features, labels, batch, false, {}));
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
  const std::unique_ptr<cuda_internal::MlpRunner> runner_ ABSL_PT_GUARDED_BY(mu_);
};

}  // namespace

int CudaDeviceCount() { return cuda_internal::DeviceCount(); }

absl::StatusOr<std::unique_ptr<ComputeBackend>> NewCudaBackend(int device) {
  const int count = CudaDeviceCount();
  if (count == 0) return absl::FailedPreconditionError("no CUDA device");
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", device, " does not exist: ", count, " device(s) visible"));
  }
  std::string error;
  std::unique_ptr<cuda_internal::MlpRunner> runner =
      cuda_internal::MlpRunner::Create(device, &error);
  if (runner == nullptr) {
    return absl::InternalError(absl::StrCat("CUDA device ", device, ": ", error));
  }
  return std::unique_ptr<ComputeBackend>(new CudaBackend(std::move(runner)));
}

}  // namespace shardps
