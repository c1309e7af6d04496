#include "model/mlp/mlp_cpu.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "compute/compute_device.h"
#include "compute/parallel_for.h"
#include "model/batch_slices.h"
#include "model/dense_layers_cpu.h"
#include "model/mlp/mlp_checks.h"

namespace shardps {
namespace {

using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;

// Below this many rows a slice's matrix products get too thin to pay for a thread.
constexpr int kMinRowsPerSlice = 32;

// One slice of the batch and its scratch memory, reused across calls.
struct Slice {
  int begin = 0;
  int rows = 0;
  // Aligned to Eigen's packet size: vectorized reductions peel an unaligned head, so the
  // summation order (and the last bits of a sum) would otherwise depend on where malloc put
  // a buffer, and two runs of one sync job would differ.
  AlignedFloats acts;     // Every layer's output (post-ReLU; logits last), rows x width.
  AlignedFloats dz[2];    // Ping-pong gradients w.r.t. a layer's pre-activation.
  AlignedFloats grads;    // This slice's gradient partials (unused by slice 0).
  double loss_sum = 0;
  int64_t correct = 0;
};

class MlpCpuCompute final : public MlpCompute {
 public:
  explicit MlpCpuCompute(int num_threads)
      : num_threads_(num_threads), parallel_(num_threads - 1) {}

  std::string Name() const override { return CpuComputeName(num_threads_); }

  absl::Status ForwardBackward(const MlpSpec& spec, absl::Span<const float* const> params,
                               const float* features, const int32_t* labels, int batch,
                               StepResult* out, absl::Span<float* const> grads) override {
    RETURN_IF_ERROR(CheckMlpComputeArgs(spec, params, features, labels, batch, true, grads));
    absl::MutexLock lock(&mu_);
    double loss_sum = 0;
    int64_t correct = 0;
    Run(spec, params, features, labels, batch, grads, &loss_sum, &correct);
    out->loss = static_cast<float>(loss_sum / batch);
    out->correct = correct;
    return absl::OkStatus();
  }

  absl::Status Evaluate(const MlpSpec& spec, absl::Span<const float* const> params,
                        const float* features, const int32_t* labels, int batch,
                        EvalResult* out) override {
    RETURN_IF_ERROR(CheckMlpComputeArgs(spec, params, features, labels, batch, false, {}));
    absl::MutexLock lock(&mu_);
    out->loss_sum = 0;
    out->correct = 0;
    Run(spec, params, features, labels, batch, {}, &out->loss_sum, &out->correct);
    out->num_examples = batch;
    return absl::OkStatus();
  }

 private:
  // grads empty: forward only.
  // REQUIRES: mu_ held, arguments checked.
  void Run(const MlpSpec& spec, absl::Span<const float* const> params, const float* features,
           const int32_t* labels, int batch, absl::Span<float* const> grads, double* loss_sum,
           int64_t* correct) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const std::vector<int> dims = spec.LayerDims();
    const bool backward = !grads.empty();
    const int num_slices = NumSlices(batch, num_threads_, kMinRowsPerSlice);
    int64_t act_width = 0, max_width = 0, num_params = 0;
    std::vector<int64_t> param_sizes;  // kernel, bias per layer
    for (size_t l = 1; l < dims.size(); ++l) {
      act_width += dims[l];
      max_width = std::max<int64_t>(max_width, dims[l]);
      num_params += int64_t{dims[l - 1]} * dims[l] + dims[l];
      param_sizes.push_back(int64_t{dims[l - 1]} * dims[l]);
      param_sizes.push_back(dims[l]);
    }
    slices_.resize(num_slices);
    for (int s = 0; s < num_slices; ++s) {
      Slice& slice = slices_[s];
      const BatchSlice bounds = SliceOfBatch(batch, num_slices, s);
      slice.begin = bounds.begin;
      slice.rows = bounds.rows;
      slice.acts.resize(slice.rows * act_width);
      if (backward) {
        slice.dz[0].resize(slice.rows * max_width);
        slice.dz[1].resize(slice.rows * max_width);
        if (s > 0) slice.grads.resize(num_params);
      }
    }

    // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
    // analysis cannot follow the lock across threads.
    parallel_.ForEach(num_slices, [&](int64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      Slice& slice = slices_[s];
      std::vector<float*> slice_grads;
      if (backward) {
        // Slice 0 writes straight into the caller's buffers; the others into their partials.
        float* p = slice.grads.data();
        for (size_t i = 0; i < grads.size(); ++i) {
          slice_grads.push_back(s == 0 ? grads[i] : p);
          if (s > 0) p += param_sizes[i];
        }
      }
      RunSlice(dims, params, features, labels, batch, &slice,
               backward ? slice_grads.data() : nullptr);
    });

    if (backward && num_slices > 1) {
      std::vector<const float*> partials;
      for (int s = 1; s < num_slices; ++s) partials.push_back(slices_[s].grads.data());
      AddPartials(parallel_, num_threads_, param_sizes, grads, partials);
    }
    for (int s = 0; s < num_slices; ++s) {
      *loss_sum += slices_[s].loss_sum;
      *correct += slices_[s].correct;
    }
  }

  // Forward (and, when grads != nullptr, backward) over one slice of the batch.
  static void RunSlice(const std::vector<int>& dims, absl::Span<const float* const> params,
                       const float* features, const int32_t* labels, int batch, Slice* slice,
                       float* const* grads) {
    const int rows = slice->rows;
    const float* x = features + int64_t{slice->begin} * dims[0];
    labels += slice->begin;

    // Forward: act[l] = relu(act[l-1] * W_l + b_l); no ReLU on the last layer (logits, the
    // last block of acts).
    DenseForward(x, rows, dims, params.data(), /*relu_last=*/false, slice->acts.data());
    int64_t hidden_width = 0;
    for (size_t l = 1; l + 1 < dims.size(); ++l) hidden_width += dims[l];
    const float* logits = slice->acts.data() + int64_t{rows} * hidden_width;

    // Softmax cross-entropy, stable by subtracting the row max; d(mean loss)/d(logits).
    const int classes = dims.back();
    const float inv_batch = 1.0f / batch;
    float* dlogits = grads != nullptr ? slice->dz[0].data() : nullptr;
    slice->loss_sum = 0;
    slice->correct = 0;
    for (int i = 0; i < rows; ++i) {
      const float* z = logits + int64_t{i} * classes;
      int arg_max = 0;
      for (int j = 1; j < classes; ++j) {
        if (z[j] > z[arg_max]) arg_max = j;
      }
      const float max = z[arg_max];
      float sum = 0;
      for (int j = 0; j < classes; ++j) sum += std::exp(z[j] - max);
      const int y = labels[i];
      slice->loss_sum += std::log(sum) - (z[y] - max);
      slice->correct += arg_max == y;
      if (dlogits != nullptr) {
        float* d = dlogits + int64_t{i} * classes;
        const float inv_sum = 1.0f / sum;
        for (int j = 0; j < classes; ++j) d[j] = std::exp(z[j] - max) * inv_sum * inv_batch;
        d[y] -= inv_batch;
      }
    }
    if (grads == nullptr) return;

    // Backward from the logits' gradient in dz[0].
    float* const dz[2] = {slice->dz[0].data(), slice->dz[1].data()};
    DenseBackward(x, rows, dims, params.data(), slice->acts.data(), dz, grads, /*din=*/nullptr);
  }

  const int num_threads_;
  ParallelFor parallel_;  // each call's slices, split by the caller
  absl::Mutex mu_;
  std::vector<Slice> slices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<MlpCompute> NewMlpCpuCompute(int num_threads) {
  return std::make_unique<MlpCpuCompute>(ResolveThreadCount(num_threads));
}

}  // namespace shardps
