#include "model/dlrm/dlrm_cpu.h"

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

namespace shardps {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using AlignedFloats = std::vector<float, Eigen::aligned_allocator<float>>;
using MatrixMap = Eigen::Map<RowMatrix>;
using ConstMatrixMap = Eigen::Map<const RowMatrix>;
// A row of a wider matrix: `cols` floats with `stride` between rows.
using StridedMap = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;
using ConstStridedMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;

// Below this many examples a slice's matrix products get too thin to pay for a thread.
constexpr int kMinRowsPerSlice = 32;

// The layer widths of the model, worked out once per call.
struct Shape {
  std::vector<int> bottom_dims;  // {num_dense, bottom...}; a single entry: no bottom MLP
  std::vector<int> top_dims;     // {interaction width, top..., 1}
  int bottom_out = 0;            // width of the bottom output
  int vectors = 0;               // width of [bottom output, pooled tables]
  int features = 0;              // width of the top MLP's input
  int n = 0;                     // vectors, for the dot interaction
  int d = 0;                     // their common dimension, for the dot interaction
  bool dot = false;
  int64_t num_dense_params = 0;
  std::vector<int64_t> param_sizes;
};

Shape MakeShape(const DlrmSpec& spec) {
  Shape s;
  s.bottom_dims.push_back(spec.num_dense);
  s.bottom_dims.insert(s.bottom_dims.end(), spec.bottom.begin(), spec.bottom.end());
  s.top_dims.push_back(spec.InteractionWidth());
  s.top_dims.insert(s.top_dims.end(), spec.top.begin(), spec.top.end());
  s.top_dims.push_back(1);
  s.bottom_out = spec.BottomOutputWidth();
  s.vectors = spec.VectorsWidth();
  s.features = spec.InteractionWidth();
  s.dot = spec.interaction == DlrmInteraction::kDot;
  s.n = spec.NumVectors();
  s.d = s.n > 0 ? s.vectors / s.n : 0;
  for (const DlrmParamInfo& p : DlrmDenseParams(spec)) {
    s.param_sizes.push_back(p.num_elements());
    s.num_dense_params += p.num_elements();
  }
  return s;
}

int64_t SumWidths(const std::vector<int>& dims) {
  int64_t w = 0;
  for (size_t l = 1; l < dims.size(); ++l) w += dims[l];
  return w;
}

// Binary log loss of logit z for label y, -y log s(z) - (1 - y) log(1 - s(z)), in a form that
// neither overflows nor loses precision for large |z|; and the sigmoid s(z), stable likewise.
float LogLoss(float z, float y) { return std::max(z, 0.0f) - z * y + std::log1p(std::exp(-std::abs(z))); }
float Sigmoid(float z) {
  if (z >= 0) return 1.0f / (1.0f + std::exp(-z));
  const float e = std::exp(z);
  return e / (1.0f + e);
}

// One slice of the batch and its scratch memory, reused across calls. Aligned to Eigen's
// packet size, so that the summation order does not depend on where malloc put a buffer.
struct Slice {
  int begin = 0;
  int rows = 0;
  AlignedFloats bottom_acts;  // rows x sum(bottom widths)
  AlignedFloats vectors;      // rows x vectors: [bottom output, pooled tables]
  AlignedFloats features;     // rows x features (dot only; concat reads vectors)
  AlignedFloats top_acts;     // rows x sum(top widths), the logits last
  AlignedFloats dz[2];        // rows x max width
  AlignedFloats dfeatures;    // rows x features (dot only)
  AlignedFloats dvectors;     // rows x vectors
  AlignedFloats gram;         // n x n, and its gradient
  AlignedFloats grads;        // this slice's dense gradient partials (unused by slice 0)
  double loss_sum = 0;
};

class DlrmCpuCompute final : public DlrmCompute {
 public:
  explicit DlrmCpuCompute(int num_threads)
      : num_threads_(num_threads), parallel_(num_threads - 1) {}

  std::string Name() const override { return CpuComputeName(num_threads_); }

  absl::Status ForwardBackward(const DlrmSpec& spec,
                               absl::Span<const absl::Span<const float>> dense_params,
                               const DlrmBatch& batch, DlrmStepOutput* out) override {
    RETURN_IF_ERROR(ValidateDlrmSpec(spec));
    RETURN_IF_ERROR(CheckDlrmDenseParams(spec, dense_params));
    RETURN_IF_ERROR(ValidateDlrmBatch(spec, batch));
    absl::MutexLock lock(&mu_);
    double loss_sum = 0;
    Run(spec, dense_params, batch, out, &loss_sum);
    out->loss = loss_sum / batch.batch;
    return absl::OkStatus();
  }

  absl::Status Evaluate(const DlrmSpec& spec,
                        absl::Span<const absl::Span<const float>> dense_params,
                        const DlrmBatch& batch, DlrmEvalOutput* out) override {
    RETURN_IF_ERROR(ValidateDlrmSpec(spec));
    RETURN_IF_ERROR(CheckDlrmDenseParams(spec, dense_params));
    RETURN_IF_ERROR(ValidateDlrmBatch(spec, batch));
    absl::MutexLock lock(&mu_);
    out->loss_sum = 0;
    Run(spec, dense_params, batch, nullptr, &out->loss_sum);
    out->num_examples = batch.batch;
    out->probabilities.resize(batch.batch);
    for (int i = 0; i < batch.batch; ++i) out->probabilities[i] = Sigmoid(logits_[i]);
    return absl::OkStatus();
  }

 private:
  // out == nullptr: forward only, the logits left in logits_.
  // REQUIRES: mu_ held, arguments checked.
  void Run(const DlrmSpec& spec, absl::Span<const absl::Span<const float>> params,
           const DlrmBatch& batch, DlrmStepOutput* out, double* loss_sum)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Shape shape = MakeShape(spec);
    const bool backward = out != nullptr;
    const int b = batch.batch;
    const int num_slices = SizeSlices(shape, b, backward);
    std::vector<const float*> param_ptrs;
    for (const absl::Span<const float>& p : params) param_ptrs.push_back(p.data());
    logits_.resize(b);
    if (backward) {
      out->logits.resize(b);
      out->dense_grads.resize(params.size());
      for (size_t i = 0; i < params.size(); ++i) out->dense_grads[i].resize(params[i].size());
    }

    // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
    // analysis cannot follow the lock across threads.
    parallel_.ForEach(num_slices, [&](int64_t s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      Slice& slice = slices_[s];
      std::vector<float*> grads;
      if (backward) {
        // Slice 0 writes straight into the output; the others into their partials.
        float* p = slice.grads.data();
        for (size_t i = 0; i < params.size(); ++i) {
          grads.push_back(s == 0 ? out->dense_grads[i].data() : p);
          if (s > 0) p += shape.param_sizes[i];
        }
      }
      RunSlice(spec, shape, param_ptrs.data(), batch, &slice, backward ? grads.data() : nullptr);
    });

    if (backward && num_slices > 1) SumPartials(shape, num_slices, out);
    if (backward) {
      ScatterAllRowGrads(spec, shape, batch, out);
      std::copy(logits_.begin(), logits_.end(), out->logits.begin());
    }
    for (int s = 0; s < num_slices; ++s) *loss_sum += slices_[s].loss_sum;
  }

  // Splits a batch of b examples into slices of at least kMinRowsPerSlice (at most one per
  // thread) and sizes their scratch; returns how many. REQUIRES: mu_ held.
  int SizeSlices(const Shape& shape, int b, bool backward) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int num_slices = NumSlices(b, num_threads_, kMinRowsPerSlice);
    int max_width = std::max(shape.vectors, shape.features);
    for (int w : shape.bottom_dims) max_width = std::max(max_width, w);
    for (int w : shape.top_dims) max_width = std::max(max_width, w);
    slices_.resize(num_slices);
    for (int s = 0; s < num_slices; ++s) {
      Slice& slice = slices_[s];
      const BatchSlice bounds = SliceOfBatch(b, num_slices, s);
      slice.begin = bounds.begin;
      slice.rows = bounds.rows;
      const int64_t rows = slice.rows;
      slice.bottom_acts.resize(rows * SumWidths(shape.bottom_dims));
      slice.vectors.resize(rows * shape.vectors);
      if (shape.dot) {
        slice.features.resize(rows * shape.features);
        slice.gram.resize(2 * int64_t{shape.n} * shape.n);
      }
      slice.top_acts.resize(rows * SumWidths(shape.top_dims));
      if (backward) {
        slice.dz[0].resize(rows * max_width);
        slice.dz[1].resize(rows * max_width);
        if (shape.dot) slice.dfeatures.resize(rows * shape.features);
        slice.dvectors.resize(rows * shape.vectors);
        if (s > 0) slice.grads.resize(shape.num_dense_params);
      }
    }
    return num_slices;
  }

  // Adds the partials of slices 1.. to the dense gradients (slice 0's), in slice order, each
  // thread over its own range of elements. REQUIRES: mu_ held.
  void SumPartials(const Shape& shape, int num_slices, DlrmStepOutput* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<float*> dst;
    for (std::vector<float>& g : out->dense_grads) dst.push_back(g.data());
    std::vector<const float*> partials;
    for (int s = 1; s < num_slices; ++s) partials.push_back(slices_[s].grads.data());
    AddPartials(parallel_, num_threads_, shape.param_sizes, dst, partials);
  }

  // Row gradients: each table on one thread, examples in order, so that the sums do not
  // depend on the slicing. REQUIRES: mu_ held.
  void ScatterAllRowGrads(const DlrmSpec& spec, const Shape& shape, const DlrmBatch& batch,
                          DlrmStepOutput* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int num_tables = static_cast<int>(spec.tables.size());
    out->row_grads.resize(num_tables);
    for (int t = 0; t < num_tables; ++t) {
      out->row_grads[t].assign(batch.tables[t].rows.size(), 0.0f);
    }
    const int workers = std::max(1, std::min(num_threads_, num_tables));
    // Pool threads run the lambda while this thread holds mu_ and waits for them all: the
    // analysis cannot follow the lock across threads.
    parallel_.ForEach(workers, [&](int64_t w) ABSL_NO_THREAD_SAFETY_ANALYSIS {
      for (int t = static_cast<int>(w); t < num_tables; t += workers) {
        ScatterRowGrads(spec, shape, batch, t, out);
      }
    });
  }

  // REQUIRES: mu_ held (reads slices_).
  void ScatterRowGrads(const DlrmSpec& spec, const Shape& shape, const DlrmBatch& batch, int t,
                       DlrmStepOutput* out) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const DlrmTableSpec& ts = spec.tables[t];
    const DlrmTableBatch& tb = batch.tables[t];
    const int dim = ts.dim;
    const int col = spec.TableColumn(t);
    float* grads = out->row_grads[t].data();
    for (const Slice& slice : slices_) {
      for (int r = 0; r < slice.rows; ++r) {
        const int i = slice.begin + r;
        const int32_t lo = tb.offsets[i], hi = tb.offsets[i + 1];
        if (lo == hi) continue;
        const float* g = slice.dvectors.data() + int64_t{r} * shape.vectors + col;
        const float scale = ts.pooling == DlrmPooling::kMean ? 1.0f / (hi - lo) : 1.0f;
        for (int32_t k = lo; k < hi; ++k) {
          float* row = grads + int64_t{tb.positions[k]} * dim;
          for (int c = 0; c < dim; ++c) row[c] += scale * g[c];
        }
      }
    }
  }

  // Forward (and, when grads != nullptr, backward) over one slice of the batch.
  void RunSlice(const DlrmSpec& spec, const Shape& shape, const float* const* params,
                const DlrmBatch& batch, Slice* slice, float* const* grads)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int rows = slice->rows;
    const int begin = slice->begin;
    const int nb = static_cast<int>(shape.bottom_dims.size()) - 1;  // bottom layers
    const float* const* top_params = params + 2 * nb;
    const float* dense = batch.dense.data() + int64_t{begin} * spec.num_dense;

    BottomForward(spec, shape, params, dense, slice);
    Pool(spec, shape, batch, slice);
    const float* features = Interact(shape, slice);

    // Top MLP and the loss.
    DenseForward(features, rows, shape.top_dims, top_params, /*relu_last=*/false,
                 slice->top_acts.data());
    const float* logits =
        slice->top_acts.data() + int64_t{rows} * (SumWidths(shape.top_dims) - 1);
    const float inv_batch = 1.0f / batch.batch;
    slice->loss_sum = 0;
    for (int r = 0; r < rows; ++r) {
      const float z = logits[r], y = batch.labels[begin + r];
      slice->loss_sum += LogLoss(z, y);
      logits_[begin + r] = z;
      if (grads != nullptr) slice->dz[0][r] = (Sigmoid(z) - y) * inv_batch;
    }
    if (grads == nullptr) return;

    // Backward through the top MLP, into the features' gradient.
    float* const dz[2] = {slice->dz[0].data(), slice->dz[1].data()};
    float* dfeatures = shape.dot ? slice->dfeatures.data() : slice->dvectors.data();
    DenseBackward(features, rows, shape.top_dims, top_params, slice->top_acts.data(), dz,
                  grads + 2 * nb, dfeatures);
    if (shape.dot) InteractBackward(shape, slice);

    // Backward through the bottom MLP (its last layer has a ReLU too).
    if (nb > 0) {
      const float* last = slice->bottom_acts.data() +
                          int64_t{rows} * (SumWidths(shape.bottom_dims) - shape.bottom_out);
      MatrixMap g0(dz[0], rows, shape.bottom_out);
      ConstStridedMap dbottom(slice->dvectors.data(), rows, shape.bottom_out,
                              Eigen::OuterStride<>(shape.vectors));
      g0.array() = (ConstMatrixMap(last, rows, shape.bottom_out).array() > 0.0f)
                       .select(dbottom.array(), 0.0f);
      DenseBackward(dense, rows, shape.bottom_dims, params, slice->bottom_acts.data(), dz,
                    grads, nullptr);
    }
  }

  // The bottom MLP over the slice's dense features, its output into the vectors' first
  // columns (the features themselves without a bottom MLP).
  static void BottomForward(const DlrmSpec& spec, const Shape& shape, const float* const* params,
                            const float* dense, Slice* slice) {
    const int rows = slice->rows;
    const int nb = static_cast<int>(shape.bottom_dims.size()) - 1;
    StridedMap bottom_out(slice->vectors.data(), rows, shape.bottom_out,
                          Eigen::OuterStride<>(shape.vectors));
    if (spec.num_dense == 0) return;
    if (nb > 0) {
      DenseForward(dense, rows, shape.bottom_dims, params, /*relu_last=*/true,
                   slice->bottom_acts.data());
      const float* last = slice->bottom_acts.data() +
                          int64_t{rows} * (SumWidths(shape.bottom_dims) - shape.bottom_out);
      bottom_out = ConstMatrixMap(last, rows, shape.bottom_out);
    } else {
      bottom_out = ConstMatrixMap(dense, rows, spec.num_dense);
    }
  }

  // Pooling: each example's rows summed in id order (then scaled for mean), into its table's
  // columns of the vectors.
  static void Pool(const DlrmSpec& spec, const Shape& shape, const DlrmBatch& batch,
                   Slice* slice) {
    const int begin = slice->begin;
    for (size_t t = 0; t < spec.tables.size(); ++t) {
      const DlrmTableSpec& ts = spec.tables[t];
      const DlrmTableBatch& tb = batch.tables[t];
      const int dim = ts.dim;
      const int col = spec.TableColumn(static_cast<int>(t));
      for (int r = 0; r < slice->rows; ++r) {
        float* o = slice->vectors.data() + int64_t{r} * shape.vectors + col;
        std::fill(o, o + dim, 0.0f);
        const int32_t lo = tb.offsets[begin + r], hi = tb.offsets[begin + r + 1];
        for (int32_t k = lo; k < hi; ++k) {
          const float* row = tb.rows.data() + int64_t{tb.positions[k]} * dim;
          for (int c = 0; c < dim; ++c) o[c] += row[c];
        }
        if (ts.pooling == DlrmPooling::kMean && hi > lo) {
          const float inv = 1.0f / (hi - lo);
          for (int c = 0; c < dim; ++c) o[c] *= inv;
        }
      }
    }
  }

  // The interaction: the top MLP's input, the vectors themselves (concat) or the bottom
  // output and the pairs' dot products (dot, written to slice->features).
  static const float* Interact(const Shape& shape, Slice* slice) {
    if (!shape.dot) return slice->vectors.data();
    const int n = shape.n, d = shape.d, vw = shape.vectors, fw = shape.features;
    MatrixMap gram(slice->gram.data(), n, n);
    for (int r = 0; r < slice->rows; ++r) {
      const float* v = slice->vectors.data() + int64_t{r} * vw;
      float* f = slice->features.data() + int64_t{r} * fw;
      std::copy(v, v + shape.bottom_out, f);
      ConstMatrixMap vm(v, n, d);
      gram.noalias() = vm * vm.transpose();
      float* p = f + shape.bottom_out;
      for (int i = 0; i < n; ++i) {
        for (int j = i + 1; j < n; ++j) *p++ = gram(i, j);
      }
    }
    return slice->features.data();
  }

  // Backward through the dot interaction: with S the symmetric matrix of the pairs'
  // gradients (zero diagonal), dV = S V; the bottom output's own columns add theirs.
  static void InteractBackward(const Shape& shape, Slice* slice) {
    const int n = shape.n, d = shape.d, vw = shape.vectors, fw = shape.features;
    MatrixMap sym(slice->gram.data() + int64_t{n} * n, n, n);
    for (int r = 0; r < slice->rows; ++r) {
      const float* v = slice->vectors.data() + int64_t{r} * vw;
      const float* g = slice->dfeatures.data() + int64_t{r} * fw;
      float* dv = slice->dvectors.data() + int64_t{r} * vw;
      const float* p = g + shape.bottom_out;
      for (int i = 0; i < n; ++i) {
        sym(i, i) = 0.0f;
        for (int j = i + 1; j < n; ++j) {
          sym(i, j) = *p;
          sym(j, i) = *p;
          ++p;
        }
      }
      MatrixMap dvm(dv, n, d);
      dvm.noalias() = sym * ConstMatrixMap(v, n, d);
      for (int c = 0; c < shape.bottom_out; ++c) dv[c] += g[c];
    }
  }

  const int num_threads_;
  ParallelFor parallel_;  // each call's slices, tables and partial sums, split by the caller
  absl::Mutex mu_;
  std::vector<Slice> slices_ ABSL_GUARDED_BY(mu_);
  std::vector<float> logits_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<DlrmCompute> NewDlrmCpuCompute(int num_threads) {
  return std::make_unique<DlrmCpuCompute>(ResolveThreadCount(num_threads));
}

}  // namespace shardps
