// shardps._core: the C++ side of the shardps Python package (python/shardps), over the same
// client library the daemons use (client/ps_client.h).
#include <pybind11/pybind11.h>

#include "python/ext/client.h"
#include "python/ext/evaluator.h"
#include "python/ext/worker.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "shardps' C++ core: use the shardps package, not this module.";
  shardps::python::DefineClient(m);
  shardps::python::DefineWorker(m);
  shardps::python::DefineEvaluator(m);
}
