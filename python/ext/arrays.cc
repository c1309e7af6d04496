#include "python/ext/arrays.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardps {
namespace python {

namespace py = pybind11;

namespace {

std::string Describe(const py::array& a) {
  std::vector<int64_t> shape(a.shape(), a.shape() + a.ndim());
  return absl::StrCat(std::string(py::str(a.dtype())), " array of shape (",
                      absl::StrJoin(shape, ", "), shape.size() == 1 ? ",)" : ")");
}

// The array behind `object`, checked for dtype T, C order and size.
template <typename T>
absl::StatusOr<py::array> Checked(const py::handle& object, absl::string_view arg,
                                  const char* dtype_name, int64_t expected, bool writable) {
  if (!py::isinstance<py::array>(object)) {
    return absl::InvalidArgumentError(absl::StrCat(arg, ": expected a numpy array of ", dtype_name,
                                                   ", got ", std::string(py::str(py::type::of(object)))));
  }
  py::array a = py::reinterpret_borrow<py::array>(object);
  if (!a.dtype().is(py::dtype::of<T>())) {
    return absl::InvalidArgumentError(
        absl::StrCat(arg, ": expected ", dtype_name, ", got a ", Describe(a),
                     " (convert it first, e.g. with .astype(numpy.", dtype_name, "))"));
  }
  if ((a.flags() & py::array::c_style) == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(arg, ": the ", Describe(a),
                     " is not C-contiguous (numpy.ascontiguousarray makes a copy that is)"));
  }
  if (writable && !a.writeable()) {
    return absl::InvalidArgumentError(absl::StrCat(arg, ": the ", Describe(a), " is read-only"));
  }
  if (expected >= 0 && a.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(arg, ": expected ", expected,
                                                   " elements, got a ", Describe(a)));
  }
  return a;
}

}  // namespace

absl::StatusOr<absl::Span<const float>> FloatsIn(const py::handle& array, absl::string_view arg,
                                                 int64_t expected) {
  absl::StatusOr<py::array> a = Checked<float>(array, arg, "float32", expected, false);
  if (!a.ok()) return a.status();
  return absl::Span<const float>(static_cast<const float*>(a->data()), a->size());
}

absl::StatusOr<absl::Span<float>> FloatsOut(const py::handle& array, absl::string_view arg,
                                            int64_t expected) {
  absl::StatusOr<py::array> a = Checked<float>(array, arg, "float32", expected, true);
  if (!a.ok()) return a.status();
  return absl::Span<float>(static_cast<float*>(a->mutable_data()), a->size());
}

absl::StatusOr<absl::Span<const int64_t>> IdsIn(const py::handle& array, absl::string_view arg) {
  absl::StatusOr<py::array> a = Checked<int64_t>(array, arg, "int64", -1, false);
  if (!a.ok()) return a.status();
  if (a->ndim() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(arg, ": expected a one-dimensional array, got a ", Describe(*a)));
  }
  return absl::Span<const int64_t>(static_cast<const int64_t*>(a->data()), a->size());
}

py::array OwningArray(std::vector<float> values, const std::vector<int64_t>& shape) {
  auto* owned = new std::vector<float>(std::move(values));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array_t<float>(dims, owned->data(), owner);
}

py::array OwningIds(std::vector<int64_t> values) {
  auto* owned = new std::vector<int64_t>(std::move(values));
  py::capsule owner(owned, [](void* p) { delete static_cast<std::vector<int64_t>*>(p); });
  const std::vector<py::ssize_t> dims = {static_cast<py::ssize_t>(owned->size())};
  return py::array_t<int64_t>(dims, owned->data(), owner);
}

}  // namespace python
}  // namespace shardps
