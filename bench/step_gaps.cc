#include "bench/step_gaps.h"

#include <algorithm>
#include <limits>

namespace shardps {
namespace bench {

std::vector<double> CompletionTimes(const std::vector<std::pair<double, int64_t>>& cumulative) {
  std::vector<double> times;
  int64_t level = 0;
  for (const auto& [t, n] : cumulative) {
    if (n < level) {  // counting restarted (a new journal): go on from there
      level = n;
      continue;
    }
    for (; level < n; ++level) times.push_back(t);
  }
  return times;
}

double StepsPerSecond(const std::vector<double>& times, double begin, double end) {
  if (!(end > begin)) return 0;
  const auto lo = std::lower_bound(times.begin(), times.end(), begin);
  const auto hi = std::lower_bound(times.begin(), times.end(), end);
  return static_cast<double>(hi - lo) / (end - begin);
}

std::vector<double> GapsWithin(const std::vector<double>& times, double begin, double end) {
  std::vector<double> gaps;
  const auto lo = std::lower_bound(times.begin(), times.end(), begin);
  const auto hi = std::upper_bound(times.begin(), times.end(), end);
  for (auto it = lo; it != hi && it + 1 != hi; ++it) gaps.push_back(*(it + 1) - *it);
  return gaps;
}

Gap LongestGapOverlapping(const std::vector<double>& times, double begin, double end) {
  Gap longest;
  if (times.size() < 2) return longest;
  // The first gap that ends at or after `begin`: it starts at the completion before.
  size_t i = static_cast<size_t>(std::lower_bound(times.begin(), times.end(), begin) -
                                 times.begin());
  if (i > 0) --i;
  for (; i + 1 < times.size() && times[i] <= end; ++i) {
    const double a = times[i], b = times[i + 1];
    if (b < begin) continue;
    if (!longest.found || b - a > longest.seconds()) longest = {a, b, true};
  }
  return longest;
}

double FirstAfter(const std::vector<double>& times, double t) {
  const auto it = std::upper_bound(times.begin(), times.end(), t);
  return it == times.end() ? std::numeric_limits<double>::quiet_NaN() : *it;
}

}  // namespace bench
}  // namespace shardps
