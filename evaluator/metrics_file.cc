#include "evaluator/metrics_file.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardps {

std::string EvalJsonLine(const EvalRecord& record) {
  const EvalMetrics& m = record.metrics;
  // Click models add their AUC (and its ceiling, where the data knows it).
  std::string auc;
  if (m.auc() > 0) auc = absl::StrFormat(", \"auc\": %.6f", m.auc());
  if (m.auc_ceiling() > 0) absl::StrAppend(&auc, absl::StrFormat(", \"auc_ceiling\": %.6f", m.auc_ceiling()));
  // Live evaluations say when in the job they were taken.
  if (m.job_elapsed_s() > 0) {
    absl::StrAppend(&auc, absl::StrFormat(", \"job_elapsed_s\": %.3f", m.job_elapsed_s()));
  }
  return absl::StrFormat(
      "{\"job_id\": %s, \"step\": %d, \"version\": %d, \"checkpoint_id\": %d, \"time\": %.3f, "
      "\"loss\": %.6f, \"accuracy\": %.6f%s, \"examples\": %d, \"consistent\": %s, "
      "\"final\": %s}",
      nlohmann::json(record.job_id).dump(), m.steps_done(), m.step(), m.checkpoint_id(),
      m.unix_time(), m.loss(), m.accuracy(), auc, m.examples(),
      record.consistent ? "true" : "false", record.final ? "true" : "false");
}

std::vector<Scalar> EvalScalars(const EvalRecord& record) {
  const EvalMetrics& m = record.metrics;
  std::vector<Scalar> scalars = {{"eval/accuracy", m.accuracy()}, {"eval/loss", m.loss()}};
  if (m.auc() > 0) scalars.push_back({"eval/auc", m.auc()});
  return scalars;
}

absl::StatusOr<std::unique_ptr<MetricsFile>> MetricsFile::Open(const std::string& path) {
  std::ofstream out(path, std::ios::app);
  if (!out) {
    return absl::FailedPreconditionError(
        absl::StrCat("metrics file \"", path, "\": cannot open it for appending"));
  }
  return std::unique_ptr<MetricsFile>(new MetricsFile(path, std::move(out)));
}

absl::Status MetricsFile::Append(const EvalRecord& record) {
  out_ << EvalJsonLine(record) << '\n';
  out_.flush();
  if (!out_) {
    out_.clear();
    return absl::UnavailableError(absl::StrCat("metrics file \"", path_, "\": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace shardps
