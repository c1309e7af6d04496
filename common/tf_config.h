// The cluster configuration every shardps process reads, in TensorFlow's TF_CONFIG format:
//   {"cluster": {"chief": ["host:port"], "worker": [...], "ps": [...], "evaluator": [...]},
//    "task": {"type": "ps", "index": 0}, "rpc_layer": "grpc", "environment": "cloud"}
// so the same pods run under Kubernetes StatefulSets or Kubeflow's TFJob, which writes it.
//
// Parsing accepts what TensorFlow accepts (an index given as a string of digits, an evaluator
// outside the cluster, unknown top-level and task keys such as Cloud ML's "trial", which are
// ignored) and validates more than TensorFlow does, so that a bad config fails at startup
// with one line naming the JSON field at fault rather than later as a connection error.
//
// The library never reads the environment: callers pass getenv("TF_CONFIG") in, so several
// configurations can live in one test process. Functions are pure apart from LoadTfConfig's
// file read; a TfConfig is a plain value, safe to read from many threads.
#ifndef SHARDPS_COMMON_TF_CONFIG_H_
#define SHARDPS_COMMON_TF_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

struct TfConfig {
  // Job name ("chief", "worker", "ps", "evaluator") -> task addresses ("host:port").
  std::map<std::string, std::vector<std::string>> cluster;
  std::string task_type;  // This process's job.
  int task_index = 0;     // This process's index within its job.
  // TensorFlow's sparse form of the worker job ({"worker": {"3": "host:port"}}, as Kubeflow's
  // TFJob writes it with enableDynamicWorker): the workers it names, by index. Elastic
  // workers (docs/elastic.md): such a worker knows only itself and joins the chief's job;
  // Tasks("worker") is then empty.
  std::map<int, std::string> sparse_workers;
  std::string rpc_layer;    // "grpc" or empty.
  std::string environment;  // E.g. "cloud" (Kubeflow); informational.

  // The addresses of `type`'s tasks; empty when the cluster has no such job.
  const std::vector<std::string>& Tasks(absl::string_view type) const;
  int NumTasks(absl::string_view type) const;
  // NOT_FOUND when the cluster has no `type` job, OUT_OF_RANGE for a bad index.
  absl::StatusOr<std::string> Address(absl::string_view type, int index) const;
  // This task's own address; empty for an evaluator outside the cluster.
  std::string TaskAddress() const;
  // E.g. "ps:0 at localhost:2222", or "evaluator:0 (not in cluster)".
  std::string DebugString() const;
};

// Parses and validates TF_CONFIG JSON. Every error is INVALID_ARGUMENT with one line naming
// the field, e.g. `TF_CONFIG: cluster.ps[1]: "localhost:99999": port must be 1..65535`.
// Checks: the JSON is an object; "cluster" holds only chief/worker/ps/evaluator, each a list
// of strings; at most one chief and one evaluator; at least one ps; each address is
// host:port with port 1..65535 (IPv6 in brackets: "[::1]:2222"); no address twice; "task"
// has a known "type" present in the cluster (an evaluator may be outside it) and an
// "index" (integer or string of digits) in range; "rpc_layer", if given, is "grpc" or "".
// The worker job may be sparse: an object of index -> address (its keys strings of digits),
// and a worker task's index must then be one of them.
absl::StatusOr<TfConfig> ParseTfConfig(absl::string_view json);

// Resolves the configuration of a daemon. A non-empty `flag_value` (--tf_config) wins: if it
// starts with '{' it is the JSON itself, otherwise the path of a file holding it. Otherwise
// `env_value` (the caller's getenv("TF_CONFIG"), may be null) is parsed. FAILED_PRECONDITION
// when neither is given; a file that cannot be read is an error naming its path.
absl::StatusOr<TfConfig> LoadTfConfig(absl::string_view flag_value, const char* env_value);

}  // namespace shardps

#endif  // SHARDPS_COMMON_TF_CONFIG_H_
