#include "evaluator/metrics_file.h"

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace shardps {

std::string EvalJsonLine(const EvalRecord& record) {
  const EvalMetrics& m = record.metrics;
  return absl::StrFormat(
      "{\"job_id\": %s, \"step\": %d, \"version\": %d, \"checkpoint_id\": %d, \"time\": %.3f, "
      "\"loss\": %.6f, \"accuracy\": %.6f, \"examples\": %d, \"consistent\": %s, \"final\": %s}",
      nlohmann::json(record.job_id).dump(), m.steps_done(), m.step(), m.checkpoint_id(),
      m.unix_time(), m.loss(), m.accuracy(), m.examples(), record.consistent ? "true" : "false",
      record.final ? "true" : "false");
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
