// What shardps.Worker and shardps.Evaluator check of a job of model "external" before they
// run it: that the ps tasks hold the variables the job declares, in the declared shapes.
//
// Thread-safety: a function; `ps` is used as PsClient allows.
#ifndef SHARDPS_PYTHON_EXT_EXTERNAL_JOB_H_
#define SHARDPS_PYTHON_EXT_EXTERNAL_JOB_H_

#include <string>

#include "absl/status/status.h"
#include "client/ps_client.h"
#include "proto/job.pb.h"

namespace shardps {
namespace python {

// FAILED_PRECONDITION starting with `what`, naming a declared variable the ps tasks lack or
// hold in another shape. REQUIRES: ps->Discover() done.
absl::Status CheckDeclaredVariables(const JobSpec& spec, PsClient* ps, const std::string& what);

}  // namespace python
}  // namespace shardps

#endif  // SHARDPS_PYTHON_EXT_EXTERNAL_JOB_H_
