// numpy arrays across the boundary, without copies where the layout allows. Values (pulled
// into, pushed from, assigned) must be float32 and C-contiguous: anything else is refused
// with InvalidArgument naming the argument, never cast (a cast copy would hide a copy, and an
// `out` that is a copy would leave the caller's array unwritten). Ids are int64 C-contiguous
// (shardps' Python layer casts other integer arrays first). Results are arrays that own the
// C++ buffer the call wrote.
//
// Thread-safety: REQUIRES the GIL.
#ifndef SHARDPS_PYTHON_EXT_ARRAYS_H_
#define SHARDPS_PYTHON_EXT_ARRAYS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace shardps {
namespace python {

// The floats of a float32 C-contiguous array (any shape) of exactly `expected` elements
// (-1: any number), read-only or writable (`out`: a writable array).
absl::StatusOr<absl::Span<const float>> FloatsIn(const pybind11::handle& array,
                                                 absl::string_view arg, int64_t expected);
absl::StatusOr<absl::Span<float>> FloatsOut(const pybind11::handle& array, absl::string_view arg,
                                            int64_t expected);
// The ids of a one-dimensional int64 C-contiguous array.
absl::StatusOr<absl::Span<const int64_t>> IdsIn(const pybind11::handle& array,
                                                absl::string_view arg);

// An array of `shape` that owns `values` (moved in, not copied).
pybind11::array OwningArray(std::vector<float> values, const std::vector<int64_t>& shape);
// A one-dimensional int64 array that owns `values`.
pybind11::array OwningIds(std::vector<int64_t> values);

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_ARRAYS_H_
