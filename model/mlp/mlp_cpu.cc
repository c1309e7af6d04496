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
#include "model/mlp/mlp_checks.h"

namespace shardps {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
using RowVectorMap = Eigen::Map<Eigen::RowVectorXf>;
using ConstRowVectorMap = Eigen::Map<const Eigen::RowVectorXf>;

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
    const int num_slices =
        std::max(1, std::min(num_threads_, (batch + kMinRowsPerSlice - 1) / kMinRowsPerSlice));
    int64_t act_width = 0, max_width = 0, num_params = 0;
    for (size_t l = 1; l < dims.size(); ++l) {
      act_width += dims[l];
      max_width = std::max<int64_t>(max_width, dims[l]);
      num_params += int64_t{dims[l - 1]} * dims[l] + dims[l];
    }
    slices_.resize(num_slices);
    for (int s = 0; s < num_slices; ++s) {
      Slice& slice = slices_[s];
      slice.begin = static_cast<int>(int64_t{batch} * s / num_slices);
      slice.rows = static_cast<int>(int64_t{batch} * (s + 1) / num_slices) - slice.begin;
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
          const size_t l = i / 2;
          const int64_t size = i % 2 == 0 ? int64_t{dims[l]} * dims[l + 1] : dims[l + 1];
          slice_grads.push_back(s == 0 ? grads[i] : p);
          if (s > 0) p += size;
        }
      }
      RunSlice(dims, params, features, labels, batch, &slice,
               backward ? slice_grads.data() : nullptr);
    });

    if (backward && num_slices > 1) {
      // Sum the partials in slice order, each thread over its own range of elements.
      // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
      // analysis cannot follow the lock across threads.
      parallel_.ForEach(num_threads_, [&](int64_t t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        int64_t offset = 0;
        for (size_t i = 0; i < grads.size(); ++i) {
          const size_t l = i / 2;
          const int64_t size = i % 2 == 0 ? int64_t{dims[l]} * dims[l + 1] : dims[l + 1];
          const int64_t lo = size * t / num_threads_, hi = size * (t + 1) / num_threads_;
          float* g = grads[i];
          for (int s = 1; s < num_slices; ++s) {
            const float* part = slices_[s].grads.data() + offset;
            for (int64_t k = lo; k < hi; ++k) g[k] += part[k];
          }
          offset += size;
        }
      });
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
    const int num_layers = static_cast<int>(dims.size()) - 1;
    const int rows = slice->rows;
    const float* x = features + int64_t{slice->begin} * dims[0];
    labels += slice->begin;

    // Forward: act[l] = relu(act[l-1] * W_l + b_l); no ReLU on the last layer (logits).
    std::vector<float*> act(num_layers);
    float* next = slice->acts.data();
    const float* in = x;
    for (int l = 0; l < num_layers; ++l) {
      act[l] = next;
      next += int64_t{rows} * dims[l + 1];
      ConstMatrixMap a(in, rows, dims[l]);
      ConstMatrixMap w(params[2 * l], dims[l], dims[l + 1]);
      ConstRowVectorMap b(params[2 * l + 1], dims[l + 1]);
      MatrixMap z(act[l], rows, dims[l + 1]);
      z.noalias() = a * w;
      z.rowwise() += b;
      if (l + 1 < num_layers) z = z.cwiseMax(0.0f);
      in = act[l];
    }

    // Softmax cross-entropy, stable by subtracting the row max; d(mean loss)/d(logits).
    const int classes = dims.back();
    const float inv_batch = 1.0f / batch;
    float* dlogits = grads != nullptr ? slice->dz[0].data() : nullptr;
    slice->loss_sum = 0;
    slice->correct = 0;
    for (int i = 0; i < rows; ++i) {
      const float* z = act[num_layers - 1] + int64_t{i} * classes;
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

    // Backward: dW_l = act[l-1]^T dz, db_l = column sums of dz, and
    // dz_{l-1} = (dz W_l^T) masked where the ReLU was off.
    int cur = 0;
    for (int l = num_layers - 1; l >= 0; --l) {
      const float* a_prev = l == 0 ? x : act[l - 1];
      ConstMatrixMap a(a_prev, rows, dims[l]);
      ConstMatrixMap dz(slice->dz[cur].data(), rows, dims[l + 1]);
      MatrixMap dw(grads[2 * l], dims[l], dims[l + 1]);
      dw.noalias() = a.transpose() * dz;
      // Column sums row by row, in a fixed order: Eigen's colwise().sum() groups the
      // additions by the output buffer's alignment, which made sync runs differ in the last
      // bits. This loop vectorizes across columns and adds rows in order.
      {
        float* out = grads[2 * l + 1];
        const int width = dims[l + 1];
        const float* dzp = slice->dz[cur].data();
        std::fill(out, out + width, 0.0f);
        for (int r = 0; r < rows; ++r) {
          const float* row = dzp + static_cast<int64_t>(r) * width;
          for (int c = 0; c < width; ++c) out[c] += row[c];
        }
      }
      if (l == 0) break;
      ConstMatrixMap w(params[2 * l], dims[l], dims[l + 1]);
      MatrixMap da(slice->dz[1 - cur].data(), rows, dims[l]);
      da.noalias() = dz * w.transpose();
      da.array() = (a.array() > 0.0f).select(da.array(), 0.0f);
      cur = 1 - cur;
    }
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
