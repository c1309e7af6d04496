// StepIdempotencyKey (worker/step_executor.h): apart from the executor, so that other step
// runners (shardps.Worker in the Python package) key their pushes the same way.
#include <cstdint>
#include <string>

#include "common/stable_hash.h"
#include "worker/step_executor.h"

namespace shardps {

uint64_t StepIdempotencyKey(const std::string& job_id, int64_t step_id, int64_t generation) {
  // The same in every process, so a step re-run by another worker (after a failure) carries
  // the same key; the job id with its NUL, so ("a", 1) and ("a\x01", ...) differ.
  return StableHash()
      .AddBytes(job_id.c_str(), job_id.size() + 1)
      .AddU64(static_cast<uint64_t>(step_id))
      .AddU64(static_cast<uint64_t>(generation))
      .Finish();
}

}  // namespace shardps
