#include "evaluator/ps_snapshot.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "common/error_detail.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

// Adds the versions of another pull of the same snapshot to *into (replacing it when `first`).
void MergeVersions(const PullVersions& more, PullVersions* into, bool first) {
  if (first) {
    *into = more;
    return;
  }
  if (more.shards.empty()) return;
  if (into->shards.empty()) {
    into->min_version = more.min_version;
    into->max_version = more.max_version;
  } else {
    into->min_version = std::min(into->min_version, more.min_version);
    into->max_version = std::max(into->max_version, more.max_version);
  }
  for (const auto& [shard, version] : more.shards) into->shards[shard] = version;
}

}  // namespace

absl::Status CheckVariablesOnPs(PsClient* ps, const Evaluator& evaluator) {
  RETURN_IF_ERROR(Annotate(ps->Discover(), "evaluator: listing the ps tasks' variables"));
  for (size_t i = 0; i < evaluator.params().size(); ++i) {
    const std::string& name = evaluator.variable_names()[i];
    const std::vector<int64_t>& shape = evaluator.params()[i].shape;
    absl::StatusOr<VariableLayout> layout = ps->GetLayout(name);
    if (!layout.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("evaluator: variable \"", name,
                                                        "\" of model \"", evaluator.job().model(),
                                                        "\" is not on the ps tasks"));
    }
    if (layout->shape != shape) {
      return absl::FailedPreconditionError(
          absl::StrCat("evaluator: variable \"", name, "\" has shape [",
                       absl::StrJoin(layout->shape, ","), "] on the ps tasks; model \"",
                       evaluator.job().model(), "\" needs [", absl::StrJoin(shape, ","), "]"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<PullVersions> PullConsistent(PsClient* ps, const std::vector<PullTarget>& targets,
                                            const std::vector<RowsPullTarget>& row_targets,
                                            int max_attempts, bool* consistent) {
  PullVersions versions;
  *consistent = false;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    if (attempt > 0) absl::SleepFor(absl::Milliseconds(5));
    if (!targets.empty()) RETURN_IF_ERROR(ps->PullMany(targets, {}, &versions));
    // Every table's rows in one call: one batch per ps.
    if (!row_targets.empty()) {
      PullVersions rows;
      RETURN_IF_ERROR(ps->PullRowsMany(row_targets, {}, &rows));
      MergeVersions(rows, &versions, /*first=*/targets.empty());
    }
    if (versions.min_version == versions.max_version) {
      *consistent = true;
      break;
    }
  }
  return versions;
}

absl::StatusOr<PullVersions> PullSnapshot(PsClient* ps, const Evaluator& evaluator,
                                          int max_attempts, std::vector<std::vector<float>>* values,
                                          bool* consistent) {
  std::vector<PullTarget> targets;
  std::vector<RowsPullTarget> row_targets;  // tables: only the rows the test split reads
  for (size_t i = 0; i < evaluator.params().size(); ++i) {
    if (evaluator.params()[i].access == VariableAccess::kRows) {
      row_targets.push_back(
          {evaluator.variable_names()[i], evaluator.row_keys(i), absl::MakeSpan((*values)[i])});
    } else {
      targets.push_back({evaluator.variable_names()[i], absl::MakeSpan((*values)[i])});
    }
  }
  return PullConsistent(ps, targets, row_targets, max_attempts, consistent);
}

}  // namespace shardps
