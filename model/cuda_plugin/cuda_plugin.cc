// The CUDA plugin, libshardps_cuda.so: every model's CUDA compute behind the C interface of
// compute/cuda_plugin_abi.h. This file makes the computes (shardps_cuda_new_compute, by the
// kind each model names); compute/cuda_plugin_exports.cc defines the rest. Built as a shared
// object that links cudart and cuBLAS; cuda_plugin.lds keeps every other symbol local, so that
// the plugin's copies of shardps code never interpose on the binary's, nor the binary's on
// them.
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "compute/cuda_plugin_abi.h"
#include "compute/cuda_plugin_exports.h"
#include "model/dlrm/dlrm_compute.h"
#include "model/dlrm/dlrm_cuda.h"
#include "model/mlp/mlp_compute.h"
#include "model/mlp/mlp_cuda.h"

extern "C" {

// A kind's object crosses as a pointer to the class its model's header names: MlpCompute for
// kMlpCudaComputeKind, DlrmCompute for kDlrmCudaComputeKind.
void* shardps_cuda_new_compute(const char* kind, int device, int* code, char* error,
                               size_t error_size) {
  const std::string name = kind != nullptr ? kind : "";
  if (name == shardps::kMlpCudaComputeKind) {
    return shardps::ReleaseToCaller(shardps::NewMlpCudaCompute(device), code, error, error_size);
  }
  if (name == shardps::kDlrmCudaComputeKind) {
    return shardps::ReleaseToCaller(shardps::NewDlrmCudaCompute(device), code, error, error_size);
  }
  shardps::WritePluginError(
      absl::InvalidArgumentError(absl::StrCat("the CUDA plugin has no compute \"", name,
                                              "\": it has \"", shardps::kMlpCudaComputeKind,
                                              "\" and \"", shardps::kDlrmCudaComputeKind, "\"")),
      code, error, error_size);
  return nullptr;
}

}  // extern "C"
