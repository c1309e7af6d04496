// CUDA + cuBLAS forward and backward of an MLP (see mlp_cuda_internal.h): its layers are
// model/dense_layers_cuda.h's, the softmax cross-entropy is here. Plain C++ and CUDA only: nvcc
// compiles this file with its own host compiler, and absl stays out.
//
// Layout: every matrix is row-major, as the ps stores it.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "compute/cuda_check.h"
#include "compute/device_buffer.h"
#include "model/dense_layers_cuda.h"
#include "model/mlp/mlp_cuda_internal.h"

namespace shardps {
namespace mlp_cuda {
namespace {

using cuda::DeviceBuffer;

constexpr int kThreads = 256;
constexpr int kWarpsPerBlock = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;

// One warp per row: the stable softmax cross-entropy of the row, whether its arg-max (the
// first on ties, as on the CPU) is the label, and, when dlogits is set, the gradient of the
// mean loss: (softmax - onehot) * inv_batch.
__global__ void SoftmaxCrossEntropyKernel(const float* logits, const int32_t* labels, int rows,
                                          int classes, float inv_batch, float* dlogits,
                                          float* row_loss, int* row_correct) {
  const int row = blockIdx.x * kWarpsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;  // Uniform across the warp.
  const float* z = logits + static_cast<int64_t>(row) * classes;

  float max = -INFINITY;
  int arg = classes;  // Loses every tie against a real index.
  for (int j = lane; j < classes; j += 32) {
    if (z[j] > max) {
      max = z[j];
      arg = j;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other_max = __shfl_xor_sync(kFullMask, max, offset);
    const int other_arg = __shfl_xor_sync(kFullMask, arg, offset);
    if (other_max > max || (other_max == max && other_arg < arg)) {
      max = other_max;
      arg = other_arg;
    }
  }
  float sum = 0.0f;
  for (int j = lane; j < classes; j += 32) sum += expf(z[j] - max);
  // A butterfly: every lane ends with the same, commutatively summed value.
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(kFullMask, sum, offset);

  const int y = labels[row];
  if (lane == 0) {
    row_loss[row] = logf(sum) - (z[y] - max);
    row_correct[row] = arg == y ? 1 : 0;
  }
  if (dlogits != nullptr) {
    float* d = dlogits + static_cast<int64_t>(row) * classes;
    const float inv_sum = 1.0f / sum;
    for (int j = lane; j < classes; j += 32) {
      const float g = expf(z[j] - max) * inv_sum * inv_batch;
      d[j] = j == y ? g - inv_batch : g;
    }
  }
}

// out[0] = sum of row_loss, out[1] = sum of row_correct, in a fixed order (one block).
__global__ void SumRowsKernel(const float* row_loss, const int* row_correct, int rows,
                              double* out) {
  __shared__ double loss[kThreads];
  __shared__ double correct[kThreads];
  double l = 0, c = 0;
  for (int i = threadIdx.x; i < rows; i += kThreads) {
    l += row_loss[i];
    c += row_correct[i];
  }
  loss[threadIdx.x] = l;
  correct[threadIdx.x] = c;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) {
      loss[threadIdx.x] += loss[threadIdx.x + s];
      correct[threadIdx.x] += correct[threadIdx.x + s];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    out[0] = loss[0];
    out[1] = correct[0];
  }
}

// Where each parameter lies in the packed parameter (and gradient) buffer, and the widths the
// step's scratch buffers need.
struct Layout {
  std::vector<size_t> offset;  // of each param, and the total last
  size_t act_width = 0;        // sum of the layers' output widths
  size_t max_width = 0;        // the widest layer output
};

Layout MakeLayout(const std::vector<int>& dims) {
  const int num_layers = static_cast<int>(dims.size()) - 1;
  Layout layout;
  layout.offset.assign(2 * num_layers + 1, 0);
  for (int l = 0; l < num_layers; ++l) {
    layout.offset[2 * l + 1] = layout.offset[2 * l] + static_cast<size_t>(dims[l]) * dims[l + 1];
    layout.offset[2 * l + 2] = layout.offset[2 * l + 1] + dims[l + 1];
    layout.act_width += dims[l + 1];
    layout.max_width = std::max<size_t>(layout.max_width, dims[l + 1]);
  }
  return layout;
}

}  // namespace

struct Runner::Impl {
  explicit Impl(std::unique_ptr<cuda::Context> c) : context(std::move(c)) {}

  std::string Run(const std::vector<int>& dims, const float* const* params,
                  const float* features, const int32_t* labels, int batch, float* const* grads,
                  double* loss_sum, int64_t* correct);

  // Makes the device current and the buffers large enough for one step.
  std::string Reserve(const Layout& layout, int input_dim, size_t batch, bool backward);
  // Copies the parameters, features and labels to the device.
  std::string Upload(const Layout& layout, int num_params, const float* const* params,
                     const float* features, int input_dim, const int32_t* labels, size_t batch);
  // act[l] = act(act[l-1] * W_l + b_l), then each row's loss and correctness and, when
  // backward, the gradient of the mean loss w.r.t. the logits into dz_d[0].
  std::string Forward(const std::vector<int>& dims, const Layout& layout, int batch,
                      const std::vector<float*>& act, bool backward);
  // Every layer's weight and bias gradient into grads_d, from dz_d[0].
  std::string Backward(const std::vector<int>& dims, const Layout& layout, int batch,
                       const std::vector<float*>& act);
  // Copies the gradients (when set) and the loss sums back, and waits for the stream.
  std::string Download(const Layout& layout, int num_params, float* const* grads,
                       double sums[2]);

  // The layers' parameters and gradients in params_d and grads_d.
  cuda::DenseParams Params(const Layout& layout) const {
    return {params_d.get(), grads_d.get(), layout.offset.data()};
  }

  const std::unique_ptr<cuda::Context> context;
  DeviceBuffer<float> params_d, grads_d, features_d, acts_d, dz_d[2], row_loss_d;
  DeviceBuffer<int32_t> labels_d;
  DeviceBuffer<int> row_correct_d;
  DeviceBuffer<double> sums_d;
};

std::string Runner::Impl::Reserve(const Layout& layout, int input_dim, size_t b, bool backward) {
  const size_t num_params = layout.offset.back();
  RETURN_IF_MESSAGE(context->MakeCurrent());
  CUDA_RETURN_IF_ERROR("cudaMalloc (parameters)", params_d.Reserve(num_params));
  CUDA_RETURN_IF_ERROR("cudaMalloc (features)", features_d.Reserve(b * input_dim));
  CUDA_RETURN_IF_ERROR("cudaMalloc (labels)", labels_d.Reserve(b));
  CUDA_RETURN_IF_ERROR("cudaMalloc (activations)", acts_d.Reserve(b * layout.act_width));
  CUDA_RETURN_IF_ERROR("cudaMalloc (row losses)", row_loss_d.Reserve(b));
  CUDA_RETURN_IF_ERROR("cudaMalloc (row correct)", row_correct_d.Reserve(b));
  CUDA_RETURN_IF_ERROR("cudaMalloc (sums)", sums_d.Reserve(2));
  if (backward) {
    CUDA_RETURN_IF_ERROR("cudaMalloc (gradients)", grads_d.Reserve(num_params));
    CUDA_RETURN_IF_ERROR("cudaMalloc (dz)", dz_d[0].Reserve(b * layout.max_width));
    CUDA_RETURN_IF_ERROR("cudaMalloc (dz)", dz_d[1].Reserve(b * layout.max_width));
  }
  return "";
}

std::string Runner::Impl::Upload(const Layout& layout, int num_params, const float* const* params,
                                 const float* features, int input_dim, const int32_t* labels,
                                 size_t b) {
  const std::vector<size_t>& offset = layout.offset;
  cudaStream_t stream = context->stream();
  for (int i = 0; i < num_params; ++i) {
    CUDA_RETURN_IF_ERROR(
        "cudaMemcpyAsync (parameters)",
        cudaMemcpyAsync(params_d.get() + offset[i], params[i],
                        (offset[i + 1] - offset[i]) * sizeof(float), cudaMemcpyHostToDevice,
                        stream));
  }
  CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (features)",
                       cudaMemcpyAsync(features_d.get(), features, b * input_dim * sizeof(float),
                                       cudaMemcpyHostToDevice, stream));
  CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (labels)",
                       cudaMemcpyAsync(labels_d.get(), labels, b * sizeof(int32_t),
                                       cudaMemcpyHostToDevice, stream));
  return "";
}

std::string Runner::Impl::Forward(const std::vector<int>& dims, const Layout& layout, int batch,
                                  const std::vector<float*>& act, bool backward) {
  const int num_layers = static_cast<int>(dims.size()) - 1;
  cudaStream_t stream = context->stream();
  RETURN_IF_MESSAGE(cuda::DenseForward(*context, Params(layout), features_d.get(), batch, dims,
                                       /*relu_last=*/false, act[0]));
  const int classes = dims.back();
  SoftmaxCrossEntropyKernel<<<(batch + kWarpsPerBlock - 1) / kWarpsPerBlock, kThreads, 0,
                              stream>>>(act[num_layers - 1], labels_d.get(), batch, classes,
                                        1.0f / batch, backward ? dz_d[0].get() : nullptr,
                                        row_loss_d.get(), row_correct_d.get());
  SumRowsKernel<<<1, kThreads, 0, stream>>>(row_loss_d.get(), row_correct_d.get(), batch,
                                            sums_d.get());
  return "";
}

std::string Runner::Impl::Backward(const std::vector<int>& dims, const Layout& layout, int batch,
                                   const std::vector<float*>& act) {
  float* const dz[2] = {dz_d[0].get(), dz_d[1].get()};
  return cuda::DenseBackward(*context, Params(layout), features_d.get(), batch, dims, act[0], dz,
                             /*din=*/nullptr);
}

std::string Runner::Impl::Download(const Layout& layout, int num_params, float* const* grads,
                                   double sums[2]) {
  const std::vector<size_t>& offset = layout.offset;
  cudaStream_t stream = context->stream();
  if (grads != nullptr) {
    for (int i = 0; i < num_params; ++i) {
      CUDA_RETURN_IF_ERROR(
          "cudaMemcpyAsync (gradients)",
          cudaMemcpyAsync(grads[i], grads_d.get() + offset[i],
                          (offset[i + 1] - offset[i]) * sizeof(float), cudaMemcpyDeviceToHost,
                          stream));
    }
  }
  CUDA_RETURN_IF_ERROR("cudaMemcpyAsync (loss)",
                       cudaMemcpyAsync(sums, sums_d.get(), 2 * sizeof(double),
                                       cudaMemcpyDeviceToHost, stream));
  CUDA_RETURN_IF_ERROR("cudaStreamSynchronize", cudaStreamSynchronize(stream));
  return "";
}

std::string Runner::Impl::Run(const std::vector<int>& dims, const float* const* params,
                              const float* features, const int32_t* labels, int batch,
                              float* const* grads, double* loss_sum, int64_t* correct) {
  const int num_layers = static_cast<int>(dims.size()) - 1;
  const int num_params = 2 * num_layers;
  const bool backward = grads != nullptr;
  const Layout layout = MakeLayout(dims);
  const size_t b = static_cast<size_t>(batch);

  RETURN_IF_MESSAGE(Reserve(layout, dims[0], b, backward));
  RETURN_IF_MESSAGE(Upload(layout, num_params, params, features, dims[0], labels, b));
  std::vector<float*> act(num_layers);
  {
    float* next = acts_d.get();
    for (int l = 0; l < num_layers; ++l) {
      act[l] = next;
      next += b * dims[l + 1];
    }
  }
  RETURN_IF_MESSAGE(Forward(dims, layout, batch, act, backward));
  if (backward) RETURN_IF_MESSAGE(Backward(dims, layout, batch, act));
  CUDA_RETURN_IF_ERROR("kernel launch", cudaGetLastError());
  double sums[2] = {0, 0};
  RETURN_IF_MESSAGE(Download(layout, num_params, grads, sums));
  *loss_sum += sums[0];
  *correct += static_cast<int64_t>(sums[1]);
  return "";
}

Runner::Runner(std::unique_ptr<cuda::Context> context)
    : impl_(std::make_unique<Impl>(std::move(context))) {}
Runner::~Runner() = default;

const std::string& Runner::device_name() const { return impl_->context->device_name(); }

std::string Runner::Run(const std::vector<int>& dims, const float* const* params,
                        const float* features, const int32_t* labels, int batch,
                        float* const* grads, double* loss_sum, int64_t* correct) {
  std::string error = impl_->Run(dims, params, features, labels, batch, grads, loss_sum, correct);
  // Let work already queued finish before the caller reuses its buffers or retries.
  if (!error.empty()) impl_->context->Synchronize();
  return error;
}

}  // namespace mlp_cuda
}  // namespace shardps
