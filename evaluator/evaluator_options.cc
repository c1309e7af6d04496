#include "evaluator/evaluator_options.h"

#include "compute/backend_kind.h"

namespace shardps {

void EvaluatorOptions::AddFlags(FlagParser* flags) {
  flags->AddString("metrics_file", &metrics_file, "append evaluations here as JSON lines");
  flags->AddString("backend", &backend, "compute backend: auto, cpu or gpu",
                   [](const std::string& value) { return ParseBackendKind(value).status(); });
  flags->AddInt("threads", &threads, "CPU compute threads", {1, 1024});
  flags->AddString("checkpoint_dir", &checkpoint_dir,
                   "sidecar mode: evaluate each committed checkpoint in this directory once");
  flags->AddDouble("poll_interval_s", &poll_interval_s,
                   "sidecar mode: how often to look for new checkpoints",
                   DoubleRange::GreaterThan(0));
  flags->AddString("tensorboard_dir", &tensorboard_dir,
                   "write TensorBoard event files of the evaluations here (made if missing): "
                   "eval/accuracy, eval/loss and, for click models, eval/auc at step = the "
                   "job's steps done, as in --metrics_file (docs/observability.md); empty: none");
}

absl::Status EvaluatorOptions::Validate(const TfConfig* config) const {
  if (sidecar()) return absl::OkStatus();
  if (config == nullptr) {
    return absl::InvalidArgumentError(
        "the evaluator follows the chief's job named by TF_CONFIG (or --tf_config), or "
        "evaluates a checkpoint directory (--checkpoint_dir); neither was given");
  }
  if (!HasChief(config)) {
    return absl::InvalidArgumentError(
        "TF_CONFIG: cluster.chief: the evaluator needs the chief's address");
  }
  return absl::OkStatus();
}

std::string EvaluatorOptions::HealthAddress(const TfConfig* config) const {
  return config != nullptr ? config->TaskAddress() : std::string();
}

bool HasChief(const TfConfig* config) {
  return config != nullptr && config->NumTasks("chief") == 1;
}

}  // namespace shardps
