// JobPhase: where the chief's current job is, by name, and the moves between phases the chief
// may make. It renders the user-visible JobStatus.phase text.
//
//   kNoJob -> kStarting -> kTraining -> kTrainingDone    (a rollback: back to kTraining)
//                 |            \____________/
//                 |                  |-> a hold: kCheckpointCut, kPsUnreachable, kRecovering,
//                 |                  |   kScaling (entered from a cut: kCheckpointCut -> kScaling)
//                 |                  |-> kInterrupted
//                 v                  v
//              kEnded <--------- kEnding <-- (every phase in which the job runs)
//
// A hold stops leasing (all of it, or above a checkpoint's barrier) for a while; Release
// returns to the phase the hold was entered from (kTraining or kTrainingDone), so that a job
// whose final checkpoint is committed keeps it across a pause. A recovery ends in kTraining.
//
// Thread-safety: not thread-safe; the chief guards it with its mutex.
#ifndef SHARDPS_COORDINATOR_JOB_PHASE_H_
#define SHARDPS_COORDINATOR_JOB_PHASE_H_

#include <string>

#include "absl/strings/string_view.h"

namespace shardps {

class JobPhase {
 public:
  enum class Kind {
    kNoJob,          // nothing submitted yet
    kStarting,       // Submit prepares a job (the previous one, if any, has ended)
    kTraining,       // RUNNING: steps are leased
    kTrainingDone,   // RUNNING: every step done, the final checkpoint committed or given up
                     // on; the job waits for the final evaluation
    kCheckpointCut,  // RUNNING, a hold: a checkpoint's barrier is up ("checkpointing: ...")
    kPsUnreachable,  // RUNNING, a hold: a ps is unreachable, nothing is leased ("paused: ...")
    kRecovering,     // RUNNING, a hold: the ps roll back, nothing is leased ("recovering: ...")
    kScaling,        // RUNNING, a hold: the job moves onto another ps set, nothing is leased
                     // ("scaling: ..."); entered from the cut of its checkpoint
    kInterrupted,    // RUNNING as its checkpoint directory says (a restarted chief resumes
                     // it), but this chief is stopping: nothing is leased or started
    kEnding,         // SUCCEEDED, FAILED or CANCELLED: the calls in flight drain
    kEnded,          // over; WaitForJobEnd returns
  };

  Kind kind() const { return kind_; }
  // The text after the phase's prefix in Text() (a hold's reason).
  const std::string& detail() const { return detail_; }

  // Moves to `next`, whose text is then `detail`. Staying in the same phase only replaces
  // the detail. Returns false, changing nothing, when the move is not allowed (Allowed):
  // a hold is left by Release (or, for kRecovering, a move to kTraining).
  bool MoveTo(Kind next, std::string detail = "");
  // Leaves the hold `hold` for the phase it was entered from (kTraining or kTrainingDone).
  // False (no change) when the current phase is not `hold`.
  bool Release(Kind hold);

  // JobStatus.state is RUNNING in this phase.
  bool running() const;
  // Steps may be leased (below a barrier in kCheckpointCut).
  bool leasing() const;
  // kCheckpointCut, kPsUnreachable, kRecovering or kScaling.
  bool held() const { return IsHold(kind_); }
  // The job's threads run (its phase is running(), or it is ending).
  bool active() const { return running() || kind_ == Kind::kEnding; }
  // The final checkpoint is committed (or given up on): kTrainingDone, or a hold entered
  // from it.
  bool final_checkpoint_done() const;

  // JobStatus.phase: "" while training (or done training), else "paused: <detail>",
  // "recovering: <detail>", "checkpointing: <detail>", "scaling: <detail>", or the
  // interrupted notice.
  std::string Text() const;

  static bool Allowed(Kind from, Kind to);
  static bool IsHold(Kind kind);
  static absl::string_view Name(Kind kind);

 private:
  Kind kind_ = Kind::kNoJob;
  std::string detail_;
  Kind resume_ = Kind::kTraining;  // where the current hold returns
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_JOB_PHASE_H_
