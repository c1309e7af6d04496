// Step completion times, and what a benchmark reads from them: throughput over a window, the
// gaps between consecutive completions, and the longest gap around an event (a checkpoint's
// cut, a recovery), which is how long training stalled there.
//
// Times are seconds on one clock, ascending; several steps may complete at the same time
// (seen in one poll).
//
// Thread-safety: pure functions.
#ifndef SHARDPS_BENCH_STEP_GAPS_H_
#define SHARDPS_BENCH_STEP_GAPS_H_

#include <cstdint>
#include <utility>
#include <vector>

namespace shardps {
namespace bench {

// One time per completed step from cumulative counts: (t, n) means n steps were done by t.
// Counts must not decrease (a decrease is ignored: what follows counts from the new level).
std::vector<double> CompletionTimes(const std::vector<std::pair<double, int64_t>>& cumulative);

// Completions in [begin, end) per second (0 for an empty window).
double StepsPerSecond(const std::vector<double>& times, double begin, double end);

// The gaps between consecutive completions that both lie in [begin, end].
std::vector<double> GapsWithin(const std::vector<double>& times, double begin, double end);

struct Gap {
  double begin = 0;  // the completion before it
  double end = 0;    // the one after it
  bool found = false;
  double seconds() const { return end - begin; }
};

// The longest gap between consecutive completions that overlaps [begin, end]: gaps that
// start before `begin` and end after it count, so a stall that began just before an event is
// seen whole. Not found when no gap overlaps the window (fewer than two completions).
Gap LongestGapOverlapping(const std::vector<double>& times, double begin, double end);

// The first completion after `t`, or NaN.
double FirstAfter(const std::vector<double>& times, double t);

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_STEP_GAPS_H_
