// StepIdempotencyKey (worker/step_executor.h): apart from the executor, so that other step
// runners (shardps.Worker in the Python package) key their pushes the same way.
#include <cstdint>
#include <string>

#include "worker/step_executor.h"

namespace shardps {

uint64_t StepIdempotencyKey(const std::string& job_id, int64_t step_id, int64_t generation) {
  // FNV-1a over the job id and the step and generation's bytes, then SplitMix64's finalizer:
  // unlike absl::Hash, the same in every process, so a step re-run by another worker (after
  // a failure) carries the same key.
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](unsigned char byte) {
    h ^= byte;
    h *= 0x100000001b3ULL;
  };
  for (char c : job_id) mix(static_cast<unsigned char>(c));
  mix(0);  // separator: ("a", 1) and ("a\x01", ...) differ
  uint64_t step = static_cast<uint64_t>(step_id);
  for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(step >> (8 * i)));
  const uint64_t gen = static_cast<uint64_t>(generation);
  for (int i = 0; i < 8; ++i) mix(static_cast<unsigned char>(gen >> (8 * i)));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  h ^= h >> 31;
  return h == 0 ? 1 : h;
}

}  // namespace shardps
