#include "evaluator/checkpoint_params.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {

absl::Status ReadCheckpointParams(CheckpointReader* reader, const Evaluator& evaluator,
                                  std::vector<std::vector<float>>* values, int64_t* version) {
  const Manifest& manifest = reader->manifest();
  int64_t lowest = std::numeric_limits<int64_t>::max();
  for (size_t i = 0; i < evaluator.params().size(); ++i) {
    const std::string& name = evaluator.variable_names()[i];
    const std::vector<int64_t>& shape = evaluator.params()[i].shape;
    const ManifestVariable* variable = manifest.FindVariable(name);
    if (variable == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(reader->manifest_path(), ": no variable \"",
                                                        name, "\" (model \"",
                                                        evaluator.job().model(), "\")"));
    }
    if (variable->shape != shape) {
      return absl::FailedPreconditionError(
          absl::StrCat(reader->manifest_path(), ": variable \"", name, "\" has shape [",
                       absl::StrJoin(variable->shape, ","), "]; model \"", evaluator.job().model(),
                       "\" needs [", absl::StrJoin(shape, ","), "]"));
    }
    const int64_t rows = shape.empty() ? 1 : shape[0];
    RETURN_IF_ERROR(reader->ReadRows(name, "", 0, rows, absl::MakeSpan((*values)[i])));
    for (const ManifestShard& shard : variable->shards) lowest = std::min(lowest, shard.version);
  }
  if (version != nullptr) *version = lowest == std::numeric_limits<int64_t>::max() ? 0 : lowest;
  return absl::OkStatus();
}

}  // namespace shardps
