#include "bench/training_throughput.h"

namespace shardps {
namespace bench {

int64_t ExamplesInSteps(int64_t steps, int64_t num_examples, int64_t batch_size) {
  if (steps <= 0 || num_examples <= 0 || batch_size <= 0) return 0;
  const int64_t steps_per_epoch = (num_examples + batch_size - 1) / batch_size;
  // Whole epochs, then the first steps of the next, all of which are full batches (the short
  // one is the epoch's last).
  return steps / steps_per_epoch * num_examples + steps % steps_per_epoch * batch_size;
}

std::optional<Window> SteadyWindow(const std::vector<ProgressSample>& samples, int64_t warmup_steps,
                                   int64_t end_steps, int64_t num_examples, int64_t batch_size) {
  const int n = static_cast<int>(samples.size());
  int begin = 0;
  while (begin < n && samples[begin].steps_done < warmup_steps) ++begin;
  int end = begin;
  while (end < n && samples[end].steps_done < end_steps) ++end;
  if (end >= n) return std::nullopt;
  const ProgressSample& a = samples[begin];
  const ProgressSample& b = samples[end];
  if (b.t_s <= a.t_s || b.steps_done <= a.steps_done) return std::nullopt;
  Window w;
  w.begin = begin;
  w.end = end;
  w.seconds = b.t_s - a.t_s;
  w.steps = b.steps_done - a.steps_done;
  w.examples = ExamplesInSteps(b.steps_done, num_examples, batch_size) -
               ExamplesInSteps(a.steps_done, num_examples, batch_size);
  w.examples_per_s = static_cast<double>(w.examples) / w.seconds;
  return w;
}

}  // namespace bench
}  // namespace shardps
