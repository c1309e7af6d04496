#include "python/ext/errors.h"

#include <Python.h>

#include <optional>
#include <string>

#include "common/error_detail.h"
#include "proto/error.pb.h"

namespace shardps {
namespace python {

namespace py = pybind11;

void ThrowStatus(const absl::Status& status) {
  const std::optional<ErrorDetail> detail = GetDetail(status);
  py::dict info;
  info["code"] = absl::StatusCodeToString(status.code());
  info["kind"] = ErrorDetail::Kind_Name(detail.has_value() ? detail->kind()
                                                            : ErrorDetail::UNSPECIFIED);
  if (detail.has_value()) {
    switch (detail->kind()) {
      case ErrorDetail::PS_UNAVAILABLE:
      case ErrorDetail::PS_STATE_LOST:
        if (detail->ps_task() >= 0) info["ps_task"] = detail->ps_task();
        break;
      case ErrorDetail::STALE_GENERATION:
        info["generation"] = detail->generation();
        break;
      case ErrorDetail::CHECKPOINT_CORRUPT:
        info["file"] = detail->file();
        break;
      case ErrorDetail::LIMIT:
        info["limit"] = detail->limit();
        break;
      default:
        break;
    }
  }
  py::object exception =
      py::module_::import("shardps.errors").attr("from_status")(std::string(status.message()), info);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(exception.ptr())), exception.ptr());
  throw py::error_already_set();
}

}  // namespace python
}  // namespace shardps
