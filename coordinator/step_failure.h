// What the chief should do about a failed RunStep (or StartJob) call to a worker, decided by
// status code and typed detail (common/error_detail.h), never by message text. The chief
// tells these apart because each calls for another action: a dead worker is marked failed
// and probed; a ps that is down or lost its state pauses the job for recovery, and is not
// the worker's fault; a stale step is re-queued and counts as no failure; a worker that lost
// the job is sent StartJob again; only a step that failed by itself counts towards
// Chief::Options::max_step_attempts.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_COORDINATOR_STEP_FAILURE_H_
#define SHARDPS_COORDINATOR_STEP_FAILURE_H_

#include "absl/status/status.h"

namespace shardps {

enum class StepFailureKind {
  kNone,           // the call succeeded
  kWorkerDown,     // the worker, or the network to it: a transport error with no detail
  kPsUnavailable,  // a ps could not be reached (ErrorDetail PS_UNAVAILABLE)
  kPsStateLost,    // a ps restarted and lost its shards (ErrorDetail PS_STATE_LOST)
  kStale,          // a stale step or generation (ABORTED): re-queue, no failure counted
  kUnknownJob,     // the worker does not run the job (ErrorDetail UNKNOWN_JOB): start it
  kIncompatible,   // the worker, or a ps it calls, speaks another wire protocol
                   // (ErrorDetail PROTOCOL_MISMATCH): the worker is unusable until replaced
  kStepFailed,     // anything else: the step itself failed; counts as an attempt
};

struct StepFailure {
  StepFailureKind kind = StepFailureKind::kNone;
  int ps_task = -1;  // kPsUnavailable, kPsStateLost: the ps concerned (-1: unknown)
};

// The typed detail decides first (PS_UNAVAILABLE, PS_STATE_LOST, STALE_STEP,
// STALE_GENERATION, UNKNOWN_JOB, PROTOCOL_MISMATCH); then the code: ABORTED is stale with or without a detail;
// UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN and INTERNAL without a detail are the
// worker's (its process or the network to it); everything else is the step's.
StepFailure ClassifyStepFailure(const absl::Status& status);

// "worker down", "ps unavailable", ...: for logs and the chief's status.
const char* StepFailureKindName(StepFailureKind kind);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_STEP_FAILURE_H_
