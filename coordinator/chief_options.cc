#include "coordinator/chief_options.h"

namespace shardps {
namespace {

// Waits and timeouts: up to a year.
constexpr IntRange kSeconds = {0, 365 * 86400};

}  // namespace

void ChiefOptions::AddFlags(FlagParser* flags) {
  flags->AddString("job", &job_file, "run this job file at once (else wait for shardctl submit)");
  flags->AddString("checkpoint_dir", &checkpoint_dir,
                   "checkpoint directory for jobs whose job file names none; without --job, "
                   "the unfinished job recorded there is resumed");
  flags->AddInt("checkpoint_every_s", &checkpoint_every_s,
                "with --checkpoint_dir, for jobs without a checkpoint schedule: seconds between "
                "checkpoints",
                kSeconds);
  flags->AddBool("resume", &resume, "--job: resume the job; fail if there is nothing to resume");
  flags->AddBool("fresh", &fresh,
                 "--job: start from step 0, removing the job's checkpoints and journal");
  flags->AddInt("final_eval_timeout_s", &final_eval_timeout_s,
                "seconds to wait for the evaluator's final evaluation after training", kSeconds);
  flags->AddChoice("evaluator", &evaluator,
                   "whether an evaluator follows the jobs, so that a job waits for its final "
                   "evaluation: auto (TF_CONFIG's cluster lists one), yes (one runs outside the "
                   "cluster, as under Kubeflow's TFJob), no",
                   {"auto", "yes", "no"});
  flags->AddInt("ps_wait_s", &ps_wait_s, "--job: seconds to wait for every ps to answer",
                kSeconds);
  flags->AddInt("interrupt_timeout_s", &interrupt_timeout_s,
                "on SIGTERM: seconds to wait for the job's checkpoint before exiting", kSeconds);
  flags->AddString("tensorboard_dir", &tensorboard_dir,
                   "write TensorBoard event files of training here (made if missing): "
                   "train/loss, train/examples_per_s, train/steps_per_s at step = steps done, "
                   "about once a second (docs/observability.md); empty: none");
}

absl::Status ChiefOptions::Validate() const {
  if (resume && fresh) return absl::InvalidArgumentError("--resume and --fresh exclude each other");
  return absl::OkStatus();
}

absl::Duration ChiefOptions::checkpoint_every() const {
  return absl::Seconds(checkpoint_every_s == 0 ? 30 : checkpoint_every_s);
}

SubmitJobRequest::Resume ChiefOptions::resume_mode() const {
  return resume ? SubmitJobRequest::RESUME : fresh ? SubmitJobRequest::FRESH : SubmitJobRequest::AUTO;
}

bool ChiefOptions::has_evaluator(const TfConfig& config) const {
  return evaluator == "auto" ? config.NumTasks("evaluator") > 0 : evaluator == "yes";
}

}  // namespace shardps
