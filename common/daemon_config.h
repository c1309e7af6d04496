// Startup configuration of the shardps daemons (ps, worker, chief, evaluator): resolving
// TF_CONFIG for a daemon of a given role, and the `--validate_config` mode that each daemon
// offers so that a deployment can check its config before it starts anything.
//
// Stateless functions; the caller passes the flag value and getenv("TF_CONFIG") in, and the
// streams to print to, so they are safe to call from any thread and easy to test.
#ifndef SHARDPS_COMMON_DAEMON_CONFIG_H_
#define SHARDPS_COMMON_DAEMON_CONFIG_H_

#include <ostream>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/tf_config.h"

namespace shardps {

// Exit codes of --validate_config.
inline constexpr int kConfigValid = 0;
inline constexpr int kConfigInvalid = 2;

// OK when `config`'s task runs as `expected_type` ("ps", "worker", "chief", "evaluator");
// INVALID_ARGUMENT naming task.type otherwise, e.g. a ps daemon given a worker's TF_CONFIG.
// An empty expected_type accepts any task type.
absl::Status CheckTaskType(const TfConfig& config, absl::string_view expected_type);

// LoadTfConfig followed by CheckTaskType: what a daemon calls at startup.
absl::StatusOr<TfConfig> LoadDaemonConfig(absl::string_view flag_value, const char* env_value,
                                          absl::string_view expected_type);

// The body of a daemon's --validate_config: given the loaded config (or its error), prints
// one line to `out` with the resolved task, its address and the cluster's size, and returns
// kConfigValid; or prints the one-line error to `err` and returns kConfigInvalid. Also checks
// the task type against `expected_type` unless it is empty.
int ValidateConfigMain(const absl::StatusOr<TfConfig>& config, absl::string_view expected_type,
                       std::ostream& out, std::ostream& err);

}  // namespace shardps

#endif  // SHARDPS_COMMON_DAEMON_CONFIG_H_
