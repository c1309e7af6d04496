// shardps.Evaluator's C++ side (python/shardps/evaluator.py wraps it): the evaluator task of a
// job whose model is the user's. It follows the chief's job as the evaluator daemon does
// (evaluator/job_follower.h: when to evaluate, pauses, rollbacks, the final model, reports
// to the chief, an unreachable chief) and hands each evaluation to Python: the user's code
// reads a consistent state of the variables the job declares, computes its metrics and
// reports them; the follower sends them to the chief (ReportEval) and the metrics file.
//
// Thread-safety: the follower runs on a thread of its own; the Python side with the GIL held.
#ifndef SHARDPS_PYTHON_EXT_EVALUATOR_H_
#define SHARDPS_PYTHON_EXT_EVALUATOR_H_

#include <pybind11/pybind11.h>

namespace shardps {
namespace python {

// Adds the _Evaluator and _EvalState classes to `module`. REQUIRES: DefineClient(module)
// first.
void DefineEvaluator(pybind11::module_& module);

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_EVALUATOR_H_
