#include "coordinator/job_phase.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace shardps {

using Kind = JobPhase::Kind;

bool JobPhase::IsHold(Kind kind) {
  return kind == Kind::kCheckpointCut || kind == Kind::kPsUnreachable ||
         kind == Kind::kRecovering || kind == Kind::kScaling;
}

bool JobPhase::Allowed(Kind from, Kind to) {
  if (from == to) return true;
  switch (from) {
    case Kind::kNoJob:
      return to == Kind::kStarting;
    case Kind::kStarting:
      // Started; or ended at once (a job that had finished); or the submission failed.
      return to == Kind::kTraining || to == Kind::kEnded || to == Kind::kNoJob;
    case Kind::kTraining:
      return to == Kind::kTrainingDone || IsHold(to) || to == Kind::kInterrupted ||
             to == Kind::kEnding;
    case Kind::kTrainingDone:
      return IsHold(to) || to == Kind::kInterrupted || to == Kind::kEnding;
    case Kind::kCheckpointCut:
      // A ps unreachable abandons the cut; a recovery begins only once it is abandoned. A
      // scale's cut stays held as it scales. (Its end returns by Release, as from every hold.)
      return to == Kind::kPsUnreachable || to == Kind::kScaling || to == Kind::kInterrupted ||
             to == Kind::kEnding;
    case Kind::kScaling:
      // Scaled: Release. A scale that failed on the ps leaves them to a recovery.
      return to == Kind::kRecovering || to == Kind::kInterrupted || to == Kind::kEnding;
    case Kind::kPsUnreachable:
      return to == Kind::kRecovering || to == Kind::kInterrupted || to == Kind::kEnding;
    case Kind::kRecovering:
      // Rolled back: training again. A failed recovery may find a ps unreachable.
      return to == Kind::kTraining || to == Kind::kPsUnreachable ||
             to == Kind::kInterrupted || to == Kind::kEnding;
    case Kind::kInterrupted:
      return to == Kind::kEnding;
    case Kind::kEnding:
      return to == Kind::kEnded;
    case Kind::kEnded:
      return to == Kind::kStarting;
  }
  return false;
}

bool JobPhase::MoveTo(Kind next, std::string detail) {
  if (!Allowed(kind_, next)) return false;
  if (IsHold(next) && !IsHold(kind_)) resume_ = kind_;
  kind_ = next;
  detail_ = std::move(detail);
  return true;
}

bool JobPhase::Release(Kind hold) {
  if (!IsHold(hold) || kind_ != hold) return false;
  kind_ = resume_;
  detail_.clear();
  return true;
}

bool JobPhase::running() const {
  return kind_ == Kind::kTraining || kind_ == Kind::kTrainingDone || held() ||
         kind_ == Kind::kInterrupted;
}

bool JobPhase::leasing() const {
  return kind_ == Kind::kTraining || kind_ == Kind::kTrainingDone ||
         kind_ == Kind::kCheckpointCut;
}

bool JobPhase::final_checkpoint_done() const {
  return kind_ == Kind::kTrainingDone || (held() && resume_ == Kind::kTrainingDone);
}

std::string JobPhase::Text() const {
  switch (kind_) {
    case Kind::kCheckpointCut:
      return absl::StrCat("checkpointing: ", detail_);
    case Kind::kPsUnreachable:
      return absl::StrCat("paused: ", detail_);
    case Kind::kRecovering:
      return absl::StrCat("recovering: ", detail_);
    case Kind::kScaling:
      return absl::StrCat("scaling: ", detail_);
    case Kind::kInterrupted:
      return "interrupted: the chief is stopping; a restarted chief resumes";
    default:
      return "";
  }
}

absl::string_view JobPhase::Name(Kind kind) {
  switch (kind) {
    case Kind::kNoJob:
      return "no job";
    case Kind::kStarting:
      return "starting";
    case Kind::kTraining:
      return "training";
    case Kind::kTrainingDone:
      return "training done";
    case Kind::kCheckpointCut:
      return "checkpoint cut";
    case Kind::kPsUnreachable:
      return "ps unreachable";
    case Kind::kRecovering:
      return "recovering";
    case Kind::kScaling:
      return "scaling";
    case Kind::kInterrupted:
      return "interrupted";
    case Kind::kEnding:
      return "ending";
    case Kind::kEnded:
      return "ended";
  }
  return "unknown";
}

}  // namespace shardps
