#include "compute/cuda_device.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace shardps {

int CudaDeviceCount() { return cuda::DeviceCount(); }

absl::StatusOr<std::unique_ptr<cuda::Context>> OpenCudaContext(int device) {
  const int count = CudaDeviceCount();
  if (count == 0) return absl::FailedPreconditionError("no CUDA device");
  if (device < 0 || device >= count) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA device ", device, " does not exist: ", count, " device(s) visible"));
  }
  std::string error;
  std::unique_ptr<cuda::Context> context = cuda::Context::Create(device, &error);
  if (context == nullptr) {
    return absl::InternalError(absl::StrCat("CUDA device ", device, ": ", error));
  }
  return context;
}

}  // namespace shardps
