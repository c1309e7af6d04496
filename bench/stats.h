// Order statistics for benchmark samples: the median and nearest-rank percentiles.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_BENCH_STATS_H_
#define SHARDPS_BENCH_STATS_H_

#include <vector>

namespace shardps {
namespace bench {

// The nearest-rank q-quantile (q in [0, 1]) of `samples`: the smallest sample with at least
// q * n samples at or below it. NaN for no samples.
double Percentile(std::vector<double> samples, double q);

// The median: the mean of the two middle samples for an even count. NaN for no samples.
double Median(std::vector<double> samples);

}  // namespace bench
}  // namespace shardps

#endif  // SHARDPS_BENCH_STATS_H_
