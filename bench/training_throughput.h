// Throughput arithmetic for training_bench: how many examples a run of steps covers (the last
// batch of an epoch is short), and the steady examples/s of a job from progress samples taken
// while it ran, leaving out a warm-up.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_BENCH_TRAINING_THROUGHPUT_H_
#define SHARDPS_BENCH_TRAINING_THROUGHPUT_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace shardps {
namespace bench {

// Examples in steps 0 .. steps-1 when step s reads batch s % steps_per_epoch of an epoch of
// `num_examples` split into batches of `batch_size`, the last one keeping the remainder (the
// chief's and Batcher's numbering). 0 when any argument is not positive.
int64_t ExamplesInSteps(int64_t steps, int64_t num_examples, int64_t batch_size);

// One reading of a job's progress: `steps_done` completed steps at time `t_s` (seconds on any
// steady clock).
struct ProgressSample {
  double t_s = 0;
  int64_t steps_done = 0;
};

// The measured window of a run: from the first sample at or past `warmup_steps` to the first
// at or past `end_steps`.
struct Window {
  int begin = 0;  // sample indices
  int end = 0;
  double seconds = 0;
  int64_t steps = 0;
  int64_t examples = 0;
  double examples_per_s = 0;
};

// nullopt when the samples (in time order) never reach warmup_steps, never reach end_steps
// after that, or span no time between the two.
std::optional<Window> SteadyWindow(const std::vector<ProgressSample>& samples, int64_t warmup_steps,
                                   int64_t end_steps, int64_t num_examples, int64_t batch_size);

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_TRAINING_THROUGHPUT_H_
