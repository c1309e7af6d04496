// JobStore: the chief's durable record of one job in its checkpoint directory
// (checkpoint/checkpoint_dir.h): the job's identity (job.json: its id and job file, written
// when the job first starts, so that the id survives chief restarts), the chief's small
// mutable state (state.json: recovery generation, total steps after add-steps, finished or
// otherwise ended, the recoveries and the steps they lost) and
// the step journal of the current generation (steps completed since the job's newest
// checkpoint, so that a restarted chief that finds every ps alive resumes without losing
// work). The checkpoints themselves are written by the ps tasks and committed by the chief
// (coordinator/checkpointing.h).
//
// Thread-safety: not thread-safe; the chief serializes calls (under its mutex).
#ifndef SHARDPS_COORDINATOR_JOB_STORE_H_
#define SHARDPS_COORDINATOR_JOB_STORE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "checkpoint/checkpoint_dir.h"
#include "proto/job.pb.h"

namespace shardps {

class JobStore {
 public:
  struct Identity {
    std::string job_id;
    JobSpec job;  // as first submitted (job_id set)
  };
  struct State {
    int64_t generation = 0;   // the recovery generation the ps tasks were last moved to
    // Steps [0, generation_start_steps) were done when `generation` began (the checkpoint it
    // restored, or 0); the steps done since are in that generation's journal.
    int64_t generation_start_steps = 0;
    int64_t total_steps = 0;  // 0: as the job file says
    bool finished = false;    // training ended and the final checkpoint is committed
    int64_t final_checkpoint = 0;
    // keep_best: the checkpoint the evaluator rated best, and its accuracy.
    int64_t best_checkpoint = 0;
    double best_accuracy = 0;
    // The job ended without succeeding ("CANCELLED" or "FAILED"); "" while it may run. A
    // chief restarted without --job resumes only a job neither finished nor ended.
    std::string ended;
    // The recoveries so far (JobStatus.recoveries, the newest kMaxRecoveries), and the steps
    // they lost in all: a restarted chief reports them as its predecessor did.
    struct Recovery {
      double unix_time = 0;
      std::string cause;
      std::string action;
      int64_t steps_lost = 0;
      double seconds = 0;
    };
    std::vector<Recovery> recoveries;
    int64_t steps_lost = 0;
    // The job's ps layout: the ps its shards are on, in task order (the partitioner cuts each
    // variable for ps_addresses.size() ps), and its version (1 as the job first started, one
    // more per scale-ps). The truth for a restarted chief, whatever its TF_CONFIG lists.
    // Empty and 0 in a journal from before scaling: TF_CONFIG's ps, version 1.
    int64_t layout_version = 0;
    std::vector<std::string> ps_addresses;
    // The dense variables are partitioned over the first dense_ps of ps_addresses (ps added
    // live, scale-ps --live, hold only dynamic tables); 0: over all of them.
    int64_t dense_ps = 0;
  };
  // State.recoveries keeps this many, the newest (steps_lost counts them all).
  static constexpr int kMaxRecoveries = 100;

  // Opens (creating) the directory. FAILED_PRECONDITION naming it when it cannot be created
  // or written.
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(const std::string& dir);

  // The identity of the job recorded in `dir` when it neither finished nor ended otherwise
  // (State.finished, State.ended): the job a chief restarted without --job resumes. nullopt
  // when `dir` does not exist or holds no such job (it is not created); DATA_LOSS naming the
  // file when job.json or state.json is unreadable.
  static absl::StatusOr<std::optional<Identity>> UnfinishedJob(const std::string& dir);

  const CheckpointDir& dir() const { return dir_; }

  // The stored identity; nullopt when the directory holds no job yet. DATA_LOSS naming the
  // file when it is unreadable.
  absl::StatusOr<std::optional<Identity>> ReadIdentity() const;
  absl::Status WriteIdentity(const Identity& identity);
  // The stored state (all defaults when there is none).
  absl::StatusOr<State> ReadState() const;
  absl::Status WriteState(const State& state);

  // Starts appending to the journal of `generation` (closing the current one).
  absl::Status StartJournal(int64_t generation);
  // Appends a completed step to the current journal. FAILED_PRECONDITION when none is open.
  absl::Status Journal(int64_t step_id);
  // The steps journalled in `generation`, in order (empty when there is no journal).
  absl::StatusOr<std::vector<int64_t>> JournalSteps(int64_t generation) const;

 private:
  explicit JobStore(CheckpointDir dir) : dir_(std::move(dir)) {}
  CheckpointDir dir_;
  std::unique_ptr<StepJournal> journal_;
  int64_t journal_generation_ = -1;
};

// Whether `submitted` is the job `stored` describes, so that it may resume from the stored
// job's checkpoints. Fields that change how the job runs but not what it trains may differ:
// epochs and steps (train longer), checkpoint and evaluation schedules, step timeout,
// backend, steps in flight, data_dir (another mount of the same data), partitioner,
// placement and num_ps (a re-sharded restore), warm_start (used only by a fresh start). Any
// other difference is INVALID_ARGUMENT naming the field and both values.
absl::Status CheckSameJob(const JobSpec& stored, const JobSpec& submitted);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_JOB_STORE_H_
