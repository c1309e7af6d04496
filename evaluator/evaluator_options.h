// The evaluator daemon's own flags (evaluator/evaluator_main.cc), each with the values it
// takes, and the checks that need TF_CONFIG too. The common daemon flags are rpc/daemon.h's.
//
// Thread-safety: plain data, for main().
#ifndef SHARDPS_EVALUATOR_EVALUATOR_OPTIONS_H_
#define SHARDPS_EVALUATOR_EVALUATOR_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "common/flags.h"
#include "common/tf_config.h"

namespace shardps {

struct EvaluatorOptions {
  std::string metrics_file = "evaluator_metrics.jsonl";  // evaluations as JSON lines
  std::string backend = "cpu";                           // auto, cpu or gpu
  int64_t threads = 1;                                   // CPU compute threads
  std::string checkpoint_dir;    // sidecar mode: evaluate its checkpoints ("": ps mode)
  double poll_interval_s = 2;    // sidecar mode: how often to look for checkpoints
  std::string tensorboard_dir;   // TensorBoard event files of the evaluations ("": none)

  // Registers a flag for each field on `flags`, which writes the field when parsed.
  void AddFlags(FlagParser* flags);
  // With TF_CONFIG (`config`, null without): INVALID_ARGUMENT when there is nothing to
  // evaluate (neither a chief to follow nor a checkpoint directory).
  absl::Status Validate(const TfConfig* config) const;

  bool sidecar() const { return !checkpoint_dir.empty(); }
  // Where the evaluator's server answers health checks: TF_CONFIG's evaluator address when
  // the cluster lists it (with TLS when the daemon has a certificate), else "": no server.
  // Every daemon's --health_port (rpc/daemon.h) answers them in plaintext besides.
  std::string HealthAddress(const TfConfig* config) const;
};

// Whether `config` (null: none) names the chief.
bool HasChief(const TfConfig* config);

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_EVALUATOR_OPTIONS_H_
