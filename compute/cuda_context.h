// One CUDA device's context: the device, a stream, and a cuBLAS handle on that stream, for
// the CUDA kernels of every model. Plain C++ without CUDA headers (nvcc's host compilation and
// absl do not mix, and absl code may hold a Context): the stream and handle come back as the
// types cudaStream_t and cublasHandle_t name.
//
// Thread safety: DeviceCount from any thread. A Context serves one caller at a time.
#ifndef SHARDPS_COMPUTE_CUDA_CONTEXT_H_
#define SHARDPS_COMPUTE_CUDA_CONTEXT_H_

#include <memory>
#include <string>

struct CUstream_st;    // cudaStream_t is CUstream_st*
struct cublasContext;  // cublasHandle_t is cublasContext*

namespace shardps {
namespace cuda {

// CUDA devices visible to this process; 0 when there is no driver or device or the runtime
// reports any error (the error is cleared, so later calls do not see it).
int DeviceCount();

class Context {
 public:
  // Makes `device` current, reads its name, creates a non-blocking stream and a cuBLAS handle
  // on it in plain FP32 math (no TF32: a GPU then agrees with the CPU to float rounding).
  // nullptr with *error set ("CUDA cudaSetDevice: ...") when any of that fails.
  static std::unique_ptr<Context> Create(int device, std::string* error);
  ~Context();

  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  // The device's name, e.g. "NVIDIA H100 80GB HBM3".
  const std::string& device_name() const { return name_; }
  CUstream_st* stream() const { return stream_; }
  cublasContext* cublas() const { return cublas_; }

  // Makes the device current on the calling thread: "" or the error.
  std::string MakeCurrent() const;
  // Waits for the work queued on the stream (say, after a failed step, before its buffers are
  // reused or the step is retried).
  void Synchronize() const;

 private:
  explicit Context(int device) : device_(device) {}

  const int device_;
  std::string name_;
  CUstream_st* stream_ = nullptr;
  cublasContext* cublas_ = nullptr;
};

}  // namespace cuda
}  // namespace shardps

#endif  // SHARDPS_COMPUTE_CUDA_CONTEXT_H_
