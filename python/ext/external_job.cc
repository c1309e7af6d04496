#include "python/ext/external_job.h"

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardps {
namespace python {

absl::Status CheckDeclaredVariables(const JobSpec& spec, PsClient* ps, const std::string& what) {
  for (const ExternalVariable& v : spec.variables()) {
    const std::string name = absl::StrCat(spec.name(), "/", v.name());
    absl::StatusOr<VariableLayout> layout = ps->GetLayout(name);
    if (!layout.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": the ps tasks do not hold variable \"", name, "\""));
    }
    const std::vector<int64_t> shape(v.shape().begin(), v.shape().end());
    if (layout->shape != shape) {
      return absl::FailedPreconditionError(absl::StrCat(
          what, ": variable \"", name, "\" is [", absl::StrJoin(layout->shape, ","),
          "] on the ps, the job declares [", absl::StrJoin(shape, ","), "]"));
    }
  }
  return absl::OkStatus();
}

}  // namespace python
}  // namespace shardps
