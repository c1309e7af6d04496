// shardps.Client's C++ side (python/shardps/client.py wraps it): a PsClient over gRPC, its
// calls taking numpy arrays without copies (python/ext/arrays.h), waiting with the GIL
// released and Ctrl-C honoured (python/ext/call.h), and failing with shardps.errors'
// exceptions (python/ext/errors.h).
//
// Thread-safety: thread-safe, as PsClient is: Python threads may call one client at once
// (each wait releases the GIL). Close while other threads call is refused.
#ifndef SHARDPS_PYTHON_EXT_CLIENT_H_
#define SHARDPS_PYTHON_EXT_CLIENT_H_

#include <pybind11/pybind11.h>

#include <memory>

#include "client/ps_client.h"

namespace shardps {
namespace python {

// Adds the Client and Versions classes to `module`.
void DefineClient(pybind11::module_& module);

// A _core._Client over `client` (shared: a Worker's job keeps it too). REQUIRES: the GIL,
// DefineClient done.
pybind11::object WrapClient(std::shared_ptr<PsClient> client);

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_CLIENT_H_
