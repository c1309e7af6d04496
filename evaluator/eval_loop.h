// What the evaluator daemon gives the loop of either of its modes (evaluator/job_follower.h,
// evaluator/sidecar.h), and how such a loop ends. Keeping time, logging, the orphan clock and
// the metrics file behind these hooks lets tests run a loop without waiting or a daemon.
//
// Thread-safety: plain data; each hook is called from the loop's thread.
#ifndef SHARDPS_EVALUATOR_EVAL_LOOP_H_
#define SHARDPS_EVALUATOR_EVAL_LOOP_H_

#include <functional>
#include <string>

#include "absl/time/time.h"
#include "common/log.h"
#include "evaluator/metrics_file.h"

namespace shardps {

enum class EvalOutcome {
  kSucceeded,  // the job succeeded and its final model was evaluated (exit 0)
  kJobFailed,  // the job failed or was cancelled (exit 4)
  kStopped,    // the daemon is stopping (a signal, the orphan timeout): its own exit code
};

struct EvalLoopHooks {
  // Waits up to `timeout`; returns true when the daemon is stopping (the loop then returns
  // kStopped). Required.
  std::function<bool(absl::Duration timeout)> sleep;
  // A sign of the job's life: the chief answered, or a new checkpoint appeared (resets the
  // daemon's orphan clock). Optional.
  std::function<void()> on_contact;
  // Each evaluation, in order (the metrics file). Optional.
  std::function<void(const EvalRecord&)> on_eval;
  // One line of the daemon's log, without a newline. Default: an info record (common/log).
  std::function<void(const std::string&)> log;

  void Log(const std::string& line) const {
    if (log) {
      log(line);
    } else {
      LogInfo() << line;
    }
  }
};

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_EVAL_LOOP_H_
