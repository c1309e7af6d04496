// CUDA + cuBLAS forward and backward of the DLRM model (see dlrm_cuda_internal.h): its bottom
// and top MLPs are model/dense_layers_cuda.h's. Plain C++ and CUDA only: nvcc compiles this
// file with its own host compiler, and absl stays out.
//
// Layout: every matrix is row-major, as the ps stores it and dlrm_cpu.cc reads it.
//
// Kernels: pooling (gather the unique rows into per-example sums or means, one warp per
// example and table), the dot interaction and its backward (one block per example), and the
// pooling backward, a scatter-add of each example's pooled gradient into its rows' gradients
// with atomicAdd. The atomics make the row gradients' last bits depend on the order the
// hardware applies them in: they are not bit-reproducible from run to run (everything else
// is), which the GPU test tolerates by comparing with the CPU within 1e-4 relative.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "compute/cuda_check.h"
#include "compute/cuda_kernels.h"
#include "compute/device_buffer.h"
#include "model/dense_layers_cuda.h"
#include "model/dlrm/dlrm_cuda_internal.h"

namespace shardps {
namespace dlrm_cuda {
namespace {

using cuda::DeviceBuffer;

constexpr int kThreads = cuda::kThreadsPerBlock;  // and cuda::GridFor's
constexpr int kWarpsPerBlock = kThreads / 32;

// Per table, in device memory: where its data lies in the packed buffers.
struct TableMeta {
  int dim;
  int column;
  int mean;
  int64_t row_base;  // into the packed rows (and row gradients), in floats
  int64_t pos_base;  // into the packed positions
  int64_t off_base;  // into the packed offsets
};

// out[r, c] = src[r, c] (row stride src_stride) where mask[r, c] > 0, else 0: the gradient of
// the bottom output, taken out of the vectors' gradient through the last ReLU.
__global__ void MaskedStridedCopyKernel(float* out, const float* src, int src_stride,
                                        const float* mask, int rows, int cols) {
  const int64_t n = static_cast<int64_t>(rows) * cols;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t r = i / cols, c = i % cols;
    out[i] = mask[i] > 0.0f ? src[r * src_stride + c] : 0.0f;
  }
}

// One warp per (example, table): the example's rows summed in id order, scaled for mean, into
// its columns of the vectors (zeros for an example without ids).
__global__ void PoolKernel(const TableMeta* meta, int num_tables, const float* rows,
                           const int32_t* offsets, const int32_t* positions, int batch,
                           float* vectors, int vectors_width) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(batch) * num_tables) return;
  const int i = static_cast<int>(warp / num_tables);
  const TableMeta m = meta[warp % num_tables];
  const int32_t lo = offsets[m.off_base + i], hi = offsets[m.off_base + i + 1];
  float* out = vectors + static_cast<int64_t>(i) * vectors_width + m.column;
  const float inv = (m.mean && hi > lo) ? 1.0f / (hi - lo) : 1.0f;
  for (int c = lane; c < m.dim; c += 32) {
    float s = 0.0f;
    for (int32_t k = lo; k < hi; ++k) {
      s += rows[m.row_base + static_cast<int64_t>(positions[m.pos_base + k]) * m.dim + c];
    }
    out[c] = (m.mean && hi > lo) ? s * inv : s;
  }
}

// The pooling backward: one warp per (example, table), adding the example's pooled gradient
// (scaled for mean) into the gradient of each of its rows. atomicAdd: rows repeat across
// examples.
__global__ void ScatterRowGradsKernel(const TableMeta* meta, int num_tables,
                                      const int32_t* offsets, const int32_t* positions,
                                      int batch, const float* dvectors, int vectors_width,
                                      float* row_grads) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= static_cast<int64_t>(batch) * num_tables) return;
  const int i = static_cast<int>(warp / num_tables);
  const TableMeta m = meta[warp % num_tables];
  const int32_t lo = offsets[m.off_base + i], hi = offsets[m.off_base + i + 1];
  if (lo == hi) return;
  const float* g = dvectors + static_cast<int64_t>(i) * vectors_width + m.column;
  const float scale = m.mean ? 1.0f / (hi - lo) : 1.0f;
  for (int32_t k = lo; k < hi; ++k) {
    float* row = row_grads + m.row_base + static_cast<int64_t>(positions[m.pos_base + k]) * m.dim;
    for (int c = lane; c < m.dim; c += 32) atomicAdd(&row[c], scale * g[c]);
  }
}

// Index of pair (i, j), i < j, in the row-major upper triangle of n vectors.
__device__ __forceinline__ int PairIndex(int i, int j, int n) {
  return i * n - i * (i + 1) / 2 + (j - i - 1);
}

// One block per example: features = [bottom output, dot(v_i, v_j) for i < j].
__global__ void DotForwardKernel(const float* vectors, int n, int d, int bottom_out,
                                 float* features, int features_width) {
  const int r = blockIdx.x;
  const float* v = vectors + static_cast<int64_t>(r) * n * d;
  float* f = features + static_cast<int64_t>(r) * features_width;
  for (int c = threadIdx.x; c < bottom_out; c += blockDim.x) f[c] = v[c];
  for (int idx = threadIdx.x; idx < n * n; idx += blockDim.x) {
    const int i = idx / n, j = idx % n;
    if (j <= i) continue;
    float s = 0.0f;
    for (int c = 0; c < d; ++c) s += v[i * d + c] * v[j * d + c];
    f[bottom_out + PairIndex(i, j, n)] = s;
  }
}

// One block per example: dv_i = sum over j != i of g(i, j) v_j, plus the gradient of the
// bottom output's own columns for vector 0.
__global__ void DotBackwardKernel(const float* vectors, const float* dfeatures, int n, int d,
                                  int bottom_out, int features_width, float* dvectors) {
  const int r = blockIdx.x;
  const float* v = vectors + static_cast<int64_t>(r) * n * d;
  const float* g = dfeatures + static_cast<int64_t>(r) * features_width;
  float* dv = dvectors + static_cast<int64_t>(r) * n * d;
  for (int idx = threadIdx.x; idx < n * d; idx += blockDim.x) {
    const int i = idx / d, c = idx % d;
    float s = 0.0f;
    for (int j = 0; j < n; ++j) {
      if (j == i) continue;
      const int p = i < j ? PairIndex(i, j, n) : PairIndex(j, i, n);
      s += g[bottom_out + p] * v[j * d + c];
    }
    if (idx < bottom_out) s += g[idx];
    dv[idx] = s;
  }
}

// Per example: the stable log loss of its logit, and when dlogits is set the gradient of the
// mean loss, (sigmoid(z) - y) / batch.
__global__ void LogLossKernel(const float* logits, const float* labels, int batch,
                              float inv_batch, float* row_loss, float* dlogits) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= batch) return;
  const float z = logits[i], y = labels[i];
  row_loss[i] = fmaxf(z, 0.0f) - z * y + log1pf(expf(-fabsf(z)));
  if (dlogits != nullptr) {
    float s;
    if (z >= 0) {
      s = 1.0f / (1.0f + expf(-z));
    } else {
      const float e = expf(z);
      s = e / (1.0f + e);
    }
    dlogits[i] = (s - y) * inv_batch;
  }
}

// *out = sum of v[0, n) in a fixed order (one block), in double.
__global__ void SumKernel(const float* v, int n, double* out) {
  __shared__ double part[kThreads];
  double s = 0;
  for (int i = threadIdx.x; i < n; i += kThreads) s += v[i];
  part[threadIdx.x] = s;
  __syncthreads();
  for (int k = kThreads / 2; k > 0; k /= 2) {
    if (threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}

int64_t SumWidths(const std::vector<int>& dims) {
  int64_t w = 0;
  for (size_t l = 1; l < dims.size(); ++l) w += dims[l];
  return w;
}

// What one step needs: the widths and, per table, where its data lies in the packed buffers.
struct Plan {
  size_t b = 0;  // batch
  bool backward = false;
  int num_tables = 0;
  int nb = 0;         // bottom layers
  int num_dense = 0;  // dense features
  int vw = 0;         // vectors' width
  int fw = 0;         // features' width
  size_t max_width = 0;
  std::vector<TableMeta> meta;
  int64_t total_rows = 0;  // floats of every table's rows
  int64_t total_ids = 0;   // positions of every table
};

Plan MakePlan(const Step& s) {
  Plan p;
  p.b = static_cast<size_t>(s.batch);
  p.backward = !s.grads.empty();
  p.num_tables = static_cast<int>(s.tables.size());
  p.nb = static_cast<int>(s.bottom_dims.size()) - 1;
  p.num_dense = s.bottom_dims[0];
  p.vw = s.vectors;
  p.fw = s.features;
  p.max_width = std::max(p.vw, p.fw);
  for (int w : s.bottom_dims) p.max_width = std::max<size_t>(p.max_width, w);
  for (int w : s.top_dims) p.max_width = std::max<size_t>(p.max_width, w);
  p.meta.resize(p.num_tables);
  for (int t = 0; t < p.num_tables; ++t) {
    const Table& tb = s.tables[t];
    p.meta[t] = TableMeta{tb.dim,       tb.column,   tb.mean ? 1 : 0,
                          p.total_rows, p.total_ids, static_cast<int64_t>(t) * (s.batch + 1)};
    p.total_rows += tb.num_rows * tb.dim;
    p.total_ids += tb.offsets[s.batch];
  }
  return p;
}

}  // namespace

struct Runner::Impl {
  explicit Impl(std::unique_ptr<cuda::Context> c) : context(std::move(c)) {}

  std::string Run(Step* step);

  // Makes the device current and the buffers large enough for the step.
  std::string Reserve(const Step& s, const Plan& p);
  // Copies the parameters, the batch and the tables' layout to the device.
  std::string Upload(const Step& s, const Plan& p);
  // Bottom MLP, pooling, interaction, top MLP and the loss. Sets *features (the top MLP's
  // input), *bottom_last (the bottom MLP's output, null without one) and *logits.
  std::string Forward(const Step& s, const Plan& p, const float** features,
                      const float** bottom_last, const float** logits);
  // Every gradient, from the logits' in dz_d[0]: dense into grads_d, rows into row_grads_d.
  std::string Backward(const Step& s, const Plan& p, const float* features,
                       const float* bottom_last);
  // Copies the gradients (when backward), the logits and the loss back, and waits.
  std::string Download(Step* s, const Plan& p, const float* logits);

  // The dense layers from index `first` of the packed parameters (and gradients).
  cuda::DenseParams Dense(size_t first) const {
    return {params_d.get(), grads_d.get(), offset.data() + first};
  }

  cudaError_t CopyToDevice(void* dst, const void* src, size_t bytes) {
    return bytes == 0 ? cudaSuccess
                      : cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                        context->stream());
  }
  cudaError_t CopyToHost(void* dst, const void* src, size_t bytes) {
    return bytes == 0 ? cudaSuccess
                      : cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                        context->stream());
  }

  const std::unique_ptr<cuda::Context> context;
  std::vector<size_t> offset;  // of each dense param in params_d / grads_d
  DeviceBuffer<float> params_d, grads_d, dense_d, labels_d, bottom_acts_d, vectors_d,
      features_d, top_acts_d, dz_d[2], dfeatures_d, dvectors_d, row_loss_d, rows_d,
      row_grads_d;
  DeviceBuffer<int32_t> offsets_d, positions_d;
  DeviceBuffer<TableMeta> meta_d;
  DeviceBuffer<double> sum_d;
};

std::string Runner::Impl::Reserve(const Step& s, const Plan& p) {
  const size_t b = p.b;
  RETURN_IF_MESSAGE(context->MakeCurrent());
  CUDA_RETURN_IF_ERROR("cudaMalloc (parameters)", params_d.Reserve(offset.back()));
  CUDA_RETURN_IF_ERROR("cudaMalloc (dense)", dense_d.Reserve(b * p.num_dense));
  CUDA_RETURN_IF_ERROR("cudaMalloc (labels)", labels_d.Reserve(b));
  CUDA_RETURN_IF_ERROR("cudaMalloc (bottom)", bottom_acts_d.Reserve(b * SumWidths(s.bottom_dims)));
  CUDA_RETURN_IF_ERROR("cudaMalloc (vectors)", vectors_d.Reserve(b * p.vw));
  CUDA_RETURN_IF_ERROR("cudaMalloc (features)", features_d.Reserve(s.dot ? b * p.fw : 1));
  CUDA_RETURN_IF_ERROR("cudaMalloc (top)", top_acts_d.Reserve(b * SumWidths(s.top_dims)));
  CUDA_RETURN_IF_ERROR("cudaMalloc (row losses)", row_loss_d.Reserve(b));
  CUDA_RETURN_IF_ERROR("cudaMalloc (rows)", rows_d.Reserve(p.total_rows));
  CUDA_RETURN_IF_ERROR("cudaMalloc (offsets)",
                       offsets_d.Reserve(static_cast<size_t>(p.num_tables) * (b + 1)));
  CUDA_RETURN_IF_ERROR("cudaMalloc (positions)", positions_d.Reserve(p.total_ids));
  CUDA_RETURN_IF_ERROR("cudaMalloc (tables)", meta_d.Reserve(p.num_tables));
  CUDA_RETURN_IF_ERROR("cudaMalloc (sum)", sum_d.Reserve(1));
  if (p.backward) {
    CUDA_RETURN_IF_ERROR("cudaMalloc (gradients)", grads_d.Reserve(offset.back()));
    CUDA_RETURN_IF_ERROR("cudaMalloc (dz)", dz_d[0].Reserve(b * p.max_width));
    CUDA_RETURN_IF_ERROR("cudaMalloc (dz)", dz_d[1].Reserve(b * p.max_width));
    CUDA_RETURN_IF_ERROR("cudaMalloc (dfeatures)", dfeatures_d.Reserve(s.dot ? b * p.fw : 1));
    CUDA_RETURN_IF_ERROR("cudaMalloc (dvectors)", dvectors_d.Reserve(b * p.vw));
    CUDA_RETURN_IF_ERROR("cudaMalloc (row gradients)", row_grads_d.Reserve(p.total_rows));
  }
  return "";
}

std::string Runner::Impl::Upload(const Step& s, const Plan& p) {
  const size_t b = p.b;
  for (size_t i = 0; i < s.params.size(); ++i) {
    CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (parameters)",
                         CopyToDevice(params_d.get() + offset[i], s.params[i],
                                      s.param_sizes[i] * sizeof(float)));
  }
  CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (dense)",
                       CopyToDevice(dense_d.get(), s.dense, b * p.num_dense * sizeof(float)));
  CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (labels)",
                       CopyToDevice(labels_d.get(), s.labels, b * sizeof(float)));
  for (int t = 0; t < p.num_tables; ++t) {
    const Table& tb = s.tables[t];
    CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (rows)",
                         CopyToDevice(rows_d.get() + p.meta[t].row_base, tb.rows,
                                      tb.num_rows * tb.dim * sizeof(float)));
    CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (offsets)",
                         CopyToDevice(offsets_d.get() + p.meta[t].off_base, tb.offsets,
                                      (b + 1) * sizeof(int32_t)));
    CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (positions)",
                         CopyToDevice(positions_d.get() + p.meta[t].pos_base, tb.positions,
                                      tb.offsets[s.batch] * sizeof(int32_t)));
  }
  CUDA_RETURN_IF_ERROR(
      "cudaMemcpyAsync (tables)",
      CopyToDevice(meta_d.get(), p.meta.data(), p.meta.size() * sizeof(TableMeta)));
  return "";
}

std::string Runner::Impl::Forward(const Step& s, const Plan& p, const float** features,
                                  const float** bottom_last, const float** logits) {
  const int batch = s.batch;
  cudaStream_t stream = context->stream();
  // Bottom MLP, its output into the vectors' first columns.
  *bottom_last = nullptr;
  if (p.num_dense > 0) {
    const float* src = dense_d.get();
    if (p.nb > 0) {
      RETURN_IF_MESSAGE(cuda::DenseForward(*context, Dense(0), dense_d.get(), batch, s.bottom_dims, true,
                                   bottom_acts_d.get()));
      *bottom_last = bottom_acts_d.get() + p.b * (SumWidths(s.bottom_dims) - s.bottom_out);
      src = *bottom_last;
    }
    CUDA_RETURN_IF_ERROR(
        "cudaMemcpy2DAsync (bottom output)",
        cudaMemcpy2DAsync(vectors_d.get(), p.vw * sizeof(float), src,
                          s.bottom_out * sizeof(float), s.bottom_out * sizeof(float), batch,
                          cudaMemcpyDeviceToDevice, stream));
  }
  if (p.num_tables > 0) {
    const int64_t warps = static_cast<int64_t>(batch) * p.num_tables;
    PoolKernel<<<static_cast<int>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock), kThreads, 0,
                 stream>>>(meta_d.get(), p.num_tables, rows_d.get(), offsets_d.get(),
                           positions_d.get(), batch, vectors_d.get(), p.vw);
  }
  *features = vectors_d.get();
  if (s.dot) {
    DotForwardKernel<<<batch, 128, 0, stream>>>(vectors_d.get(), s.n, s.d, s.bottom_out,
                                                features_d.get(), p.fw);
    *features = features_d.get();
  }

  // Top MLP, loss.
  const size_t top_first = 2 * static_cast<size_t>(p.nb);
  RETURN_IF_MESSAGE(
      cuda::DenseForward(*context, Dense(top_first), *features, batch, s.top_dims, false,
                         top_acts_d.get()));
  *logits = top_acts_d.get() + p.b * (SumWidths(s.top_dims) - 1);
  LogLossKernel<<<(batch + kThreads - 1) / kThreads, kThreads, 0, stream>>>(
      *logits, labels_d.get(), batch, 1.0f / batch, row_loss_d.get(),
      p.backward ? dz_d[0].get() : nullptr);
  SumKernel<<<1, kThreads, 0, stream>>>(row_loss_d.get(), batch, sum_d.get());
  return "";
}

std::string Runner::Impl::Backward(const Step& s, const Plan& p, const float* features,
                                   const float* bottom_last) {
  const int batch = s.batch;
  cudaStream_t stream = context->stream();
  float* dz[2] = {dz_d[0].get(), dz_d[1].get()};
  float* dfeatures = s.dot ? dfeatures_d.get() : dvectors_d.get();
  const size_t top_first = 2 * static_cast<size_t>(p.nb);
  RETURN_IF_MESSAGE(
      cuda::DenseBackward(*context, Dense(top_first), features, batch, s.top_dims,
                          top_acts_d.get(), dz, dfeatures));
  if (s.dot) {
    DotBackwardKernel<<<batch, 128, 0, stream>>>(vectors_d.get(), dfeatures_d.get(), s.n, s.d,
                                                 s.bottom_out, p.fw, dvectors_d.get());
  }
  if (p.nb > 0) {
    MaskedStridedCopyKernel<<<cuda::GridFor(int64_t{batch} * s.bottom_out), kThreads, 0, stream>>>(
        dz[0], dvectors_d.get(), p.vw, bottom_last, batch, s.bottom_out);
    RETURN_IF_MESSAGE(
        cuda::DenseBackward(*context, Dense(0), dense_d.get(), batch, s.bottom_dims,
                            bottom_acts_d.get(), dz, nullptr));
  }
  if (p.num_tables > 0) {
    CUDA_RETURN_IF_ERROR(
        "cudaMemsetAsync (row gradients)",
        cudaMemsetAsync(row_grads_d.get(), 0, p.total_rows * sizeof(float), stream));
    const int64_t warps = static_cast<int64_t>(batch) * p.num_tables;
    ScatterRowGradsKernel<<<static_cast<int>((warps + kWarpsPerBlock - 1) / kWarpsPerBlock),
                            kThreads, 0, stream>>>(meta_d.get(), p.num_tables, offsets_d.get(),
                                                   positions_d.get(), batch, dvectors_d.get(),
                                                   p.vw, row_grads_d.get());
  }
  return "";
}

std::string Runner::Impl::Download(Step* s, const Plan& p, const float* logits) {
  if (p.backward) {
    for (size_t i = 0; i < s->grads.size(); ++i) {
      CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (gradients)",
                           CopyToHost(s->grads[i], grads_d.get() + offset[i],
                                      s->param_sizes[i] * sizeof(float)));
    }
    for (int t = 0; t < p.num_tables; ++t) {
      const Table& tb = s->tables[t];
      CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (row gradients)",
                           CopyToHost(tb.row_grads, row_grads_d.get() + p.meta[t].row_base,
                                      tb.num_rows * tb.dim * sizeof(float)));
    }
  }
  CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (logits)",
                       CopyToHost(s->logits, logits, p.b * sizeof(float)));
  double sum = 0;
  CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (loss)", CopyToHost(&sum, sum_d.get(), sizeof(sum)));
  CUDA_RETURN_IF_ERROR("cudaStreamSynchronize", cudaStreamSynchronize(context->stream()));
  s->loss_sum = sum;
  return "";
}

std::string Runner::Impl::Run(Step* s) {
  const Plan p = MakePlan(*s);
  offset.assign(s->params.size() + 1, 0);
  for (size_t i = 0; i < s->params.size(); ++i) offset[i + 1] = offset[i] + s->param_sizes[i];
  RETURN_IF_MESSAGE(Reserve(*s, p));
  RETURN_IF_MESSAGE(Upload(*s, p));
  const float* features = nullptr;
  const float* bottom_last = nullptr;
  const float* logits = nullptr;
  RETURN_IF_MESSAGE(Forward(*s, p, &features, &bottom_last, &logits));
  if (p.backward) RETURN_IF_MESSAGE(Backward(*s, p, features, bottom_last));
  CUDA_RETURN_IF_ERROR("kernel launch", cudaGetLastError());
  return Download(s, p, logits);
}

Runner::Runner(std::unique_ptr<cuda::Context> context)
    : impl_(std::make_unique<Impl>(std::move(context))) {}
Runner::~Runner() = default;

const std::string& Runner::device_name() const { return impl_->context->device_name(); }

std::string Runner::Run(Step* step) {
  std::string error = impl_->Run(step);
  // Let work already queued finish before the caller reuses its buffers or retries.
  if (!error.empty()) impl_->context->Synchronize();
  return error;
}

}  // namespace dlrm_cuda
}  // namespace shardps
