// Test helpers for the parts of the chief that share a ChiefState (the dispatcher, recovery,
// the checkpoint driver): the state as the chief leaves it once a job has started training.
#ifndef SHARDPS_COORDINATOR_CHIEF_TEST_UTIL_H_
#define SHARDPS_COORDINATOR_CHIEF_TEST_UTIL_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "client/variable_layout.h"
#include "coordinator/chief_state.h"
#include "proto/job.pb.h"

namespace shardps {

// state->job = job (its job_id names the job), state->defs = defs, a scheduler of
// total_steps, generation 1, status RUNNING with the job's id, and phase kStarting then
// kTraining. INTERNAL when the scheduler or a phase change is refused.
absl::Status StartTrainingLocked(ChiefState* state, const JobSpec& job,
                                 std::vector<VariableDef> defs, int64_t total_steps)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu);

}  // namespace shardps

#endif  // SHARDPS_COORDINATOR_CHIEF_TEST_UTIL_H_
