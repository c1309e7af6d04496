// Model::Create, the one place that knows every model.
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "model/dlrm/dlrm_model.h"
#include "model/external/external_model.h"
#include "model/mlp/mlp_model.h"
#include "model/model.h"

namespace shardps {

absl::StatusOr<std::unique_ptr<Model>> Model::Create(const JobSpec& job, const DatasetInfo& data) {
  if (job.model() == kExternalModel) return CreateExternalModel(job);
  if (job.model() == kDlrmPrefix || absl::StartsWith(job.model(), absl::StrCat(kDlrmPrefix, ":"))) {
    return CreateDlrmModel(job, data);
  }
  return CreateMlpModel(job, data);
}

}  // namespace shardps
