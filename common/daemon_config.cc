#include "common/daemon_config.h"

#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

std::string Quote(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

// Status messages are built to be one line; keep it so even if one is not.
std::string OneLine(absl::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}

}  // namespace

absl::Status CheckTaskType(const TfConfig& config, absl::string_view expected_type) {
  if (expected_type.empty() || config.task_type == expected_type) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("TF_CONFIG: task.type: ", Quote(config.task_type),
                   " does not match this daemon, which runs ", Quote(expected_type), " tasks"));
}

absl::StatusOr<TfConfig> LoadDaemonConfig(absl::string_view flag_value, const char* env_value,
                                          absl::string_view expected_type) {
  ASSIGN_OR_RETURN(TfConfig config, LoadTfConfig(flag_value, env_value));
  RETURN_IF_ERROR(CheckTaskType(config, expected_type));
  return config;
}

int ValidateConfigMain(const absl::StatusOr<TfConfig>& config, absl::string_view expected_type,
                       std::ostream& out, std::ostream& err) {
  absl::Status status = config.status();
  if (status.ok()) status = CheckTaskType(*config, expected_type);
  if (!status.ok()) {
    err << OneLine(status.message()) << "\n";
    return kConfigInvalid;
  }
  std::vector<std::string> jobs;
  for (const auto& [job, tasks] : config->cluster) {
    jobs.push_back(absl::StrCat(job, "=", tasks.size()));
  }
  out << "TF_CONFIG OK: " << config->DebugString() << " (cluster: " << absl::StrJoin(jobs, " ")
      << ")\n";
  return kConfigValid;
}

}  // namespace shardps
