// The evaluator's sidecar mode (TensorFlow's SidecarEvaluator): watches a job's checkpoint
// directory and evaluates each committed checkpoint once, oldest first, from the files alone
// (no ps needed), with the same Evaluator as the ps mode. Each result goes to the metrics file
// (with the checkpoint's id and steps) and, when a chief is configured and reachable, to the
// chief (ReportEval with EvalMetrics.checkpoint_id and steps_done; final = the manifest's
// "final").
//
// Thread-safety: RunSidecar runs on the calling thread; the options' objects must outlive it.
#ifndef SHARDPS_EVALUATOR_SIDECAR_H_
#define SHARDPS_EVALUATOR_SIDECAR_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "checkpoint/checkpoint_dir.h"
#include "common/data_root.h"
#include "compute/compute_device.h"
#include "evaluator/chief_link.h"
#include "evaluator/eval_loop.h"

namespace shardps {

struct SidecarOptions {
  std::string checkpoint_dir;             // required: the job's "checkpoint.dir"
  const ComputeDevice* device = nullptr;  // required: where the job's model computes
  DataRoot data_root;  // where the job's data_dir must lie (default unconfined)
  ChiefLink* chief = nullptr;             // optional
  // Keep watching after the final checkpoint (and after the job ended).
  bool long_lived = false;
  // How often the directory is listed (and the chief asked).
  absl::Duration poll_interval = absl::Seconds(2);
  // Called with each checkpoint right before it is read. For tests (prune it meanwhile).
  std::function<void(const CommittedCheckpoint&)> before_read;
};

// Never evaluates a directory without a manifest (an interrupted checkpoint does not exist),
// and never dies of a bad checkpoint: one whose manifest does not parse, whose files fail
// their checksums, that lacks the model's variables, or that is pruned while it is read is
// logged (naming the file) and skipped. Each checkpoint is tried once.
// Ends (kSucceeded) after evaluating a checkpoint marked "final": true, unless long_lived.
// With a chief: when the chief reports the directory's job FAILED or CANCELLED, it evaluates
// what is committed and returns kJobFailed; SUCCEEDED without a final checkpoint, kSucceeded.
// Without one, only the daemon's orphan clock ends a wait that never sees a final checkpoint:
// every new checkpoint and every answer of the chief counts as contact (hooks.on_contact).
EvalOutcome RunSidecar(const SidecarOptions& options, const EvalLoopHooks& hooks);

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_SIDECAR_H_
