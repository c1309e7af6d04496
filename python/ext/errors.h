// Python exceptions from absl::Status. The classes are shardps.errors' (one per typed detail
// kind and one per status code); ThrowStatus raises the one `status` maps to, with the code,
// the detail's kind and its fields as attributes, so Python code decides by class, as C++
// decides by code and detail (common/error_detail.h).
//
// Thread-safety: REQUIRES the GIL.
#ifndef SHARDPS_PYTHON_EXT_ERRORS_H_
#define SHARDPS_PYTHON_EXT_ERRORS_H_

#include <pybind11/pybind11.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardps {
namespace python {

// Throws pybind11::error_already_set with shardps.errors' exception for `status`.
// REQUIRES: !status.ok().
[[noreturn]] void ThrowStatus(const absl::Status& status);

inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) ThrowStatus(status);
}

template <typename T>
T ValueOrThrow(absl::StatusOr<T> value) {
  if (!value.ok()) ThrowStatus(value.status());
  return *std::move(value);
}

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_ERRORS_H_
