// ChiefState: what the parts of the chief share about its current job, under the one mutex
// they all hold to read or change it: the chief (coordinator/chief.cc), its dispatcher, its
// checkpoint driver and its recovery. Each part keeps its own fields under the same mutex;
// this holds what several of them read: the job, its queue, its durable record, its phase
// and the status that the chief serves.
//
// Thread-safety: every field is guarded by `mu`, and every method REQUIRES it.
#ifndef SHARDPS_COORDINATOR_CHIEF_STATE_H_
#define SHARDPS_COORDINATOR_CHIEF_STATE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/ps_client.h"
#include "coordinator/job_phase.h"
#include "coordinator/job_store.h"
#include "coordinator/scheduler.h"
#include "proto/coordinator.pb.h"
#include "proto/job.pb.h"

namespace shardps {

struct ChiefState {
  // Moves the phase (JobPhase::MoveTo); when its kind changes, wakes the dispatcher and the
  // control thread, which both decide by it.
  bool SetPhaseLocked(JobPhase::Kind next, std::string detail = "")
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Leaves a hold (JobPhase::Release), waking both threads.
  bool ReleasePhaseLocked(JobPhase::Kind hold) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // The running job ends as `state` (SUCCEEDED, FAILED, CANCELLED), with `error` when not
  // empty: the phase becomes kEnding, and the calls in flight drain. REQUIRES: the job runs.
  void EndJobLocked(JobStatus::State state, const std::string& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Writes store_state to the store; a failure is reported in status.checkpoint_error.
  // REQUIRES: store.
  void WriteStateLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // OK when `job_id` is "" or the current job's. FAILED_PRECONDITION before any job;
  // NOT_FOUND naming both ids for another job.
  absl::Status CheckJobLocked(const std::string& job_id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  // Wakes the dispatcher (its condition: dispatch_wake or stopping).
  void WakeDispatcherLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { dispatch_wake = true; }
  void WakeControlLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { control_wake = true; }

  mutable absl::Mutex mu;

  JobPhase phase ABSL_GUARDED_BY(mu);
  // The served status, less what Status() adds (workers, ps, progress, speed).
  JobStatus status ABSL_GUARDED_BY(mu);
  JobSpec job ABSL_GUARDED_BY(mu);
  std::vector<VariableDef> defs ABSL_GUARDED_BY(mu);
  std::unique_ptr<Scheduler> scheduler ABSL_GUARDED_BY(mu);
  // The job's durable record; null without a usable checkpoint directory. Its dir() is
  // immutable: the control thread reads it without mu.
  std::unique_ptr<JobStore> store ABSL_GUARDED_BY(mu);
  JobStore::State store_state ABSL_GUARDED_BY(mu);
  // The recovery generation the ps tasks are at: steps of another are stale.
  int64_t generation ABSL_GUARDED_BY(mu) = 0;
  // The ps the job's shards are on now, in task order (the chief's client reaches these), and
  // the layout's version (JobStore::State; a scale-ps changes both: ps_scaling.h).
  std::vector<std::string> ps_addresses ABSL_GUARDED_BY(mu);
  int64_t layout_version ABSL_GUARDED_BY(mu) = 0;
  // The dense variables are on the first dense_ps of ps_addresses (0: all; JobStore::State).
  int dense_ps ABSL_GUARDED_BY(mu) = 0;
  absl::Time start ABSL_GUARDED_BY(mu);
  absl::Time end ABSL_GUARDED_BY(mu);
  absl::Time training_end ABSL_GUARDED_BY(mu) = absl::InfiniteFuture();

  // Not phases, and so kept as flags:
  // The evaluator's final report is in. A message received, which may come before or after
  // the final checkpoint and stands across a rollback; not a step in the job's life.
  bool final_eval ABSL_GUARDED_BY(mu) = false;
  // The chief itself is being destroyed: every thread of it returns, whatever the job's
  // phase (which stays as it was).
  bool stopping ABSL_GUARDED_BY(mu) = false;
  // Wake-ups of the dispatcher and of the control thread: "look again", set by whoever
  // changed what they look at, cleared by them before they wait.
  bool dispatch_wake ABSL_GUARDED_BY(mu) = false;
  bool control_wake ABSL_GUARDED_BY(mu) = false;
};

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHIEF_STATE_H_
