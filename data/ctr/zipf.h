// ZipfSampler: draws ranks 0..n-1 with P(rank r) proportional to (r + 1)^-s, in O(1) time
// and O(head) memory for any n up to 2^62, so vocabularies of 10^9 ids cost nothing.
//
// The head (the `head` most frequent ranks, which hold most of the mass for s near 1) is an
// alias table (Walker / Vose): one uniform, one comparison. The tail is drawn by
// rejection-inversion (W. Hörmann and G. Derflinger, "Rejection-inversion to generate
// variates from monotone discrete distributions", 1996), restricted to ranks >= head; the
// alias table picks head or tail with the tail's exact mass (summed by Euler-Maclaurin,
// relative error below 1e-12). Entry thresholds are 32-bit, so probabilities are exact
// to about 2^-32 relative. Expected cost: a table lookup, plus for a tail draw about one
// log1p and one exp.
//
// Thread-safety: immutable after Create; Sample is const (the caller's generator carries
// the state).
#ifndef SHARDPS_DATA_CTR_ZIPF_H_
#define SHARDPS_DATA_CTR_ZIPF_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "data/ctr/ctr_hash.h"

namespace shardps {

class ZipfSampler {
 public:
  static constexpr int kDefaultHead = 1024;  // at most 65535

  // INVALID_ARGUMENT for n < 1, n > 2^62, s < 0 or not finite, head < 1.
  static absl::StatusOr<ZipfSampler> Create(int64_t n, double s, int head = kDefaultHead);

  int64_t n() const { return n_; }
  double exponent() const { return s_; }

  // A rank in [0, n).
  int64_t Sample(SplitMix64& rng) const {
    const uint64_t r = rng.Next();
    const Entry& e = table_[((r >> 32) * table_.size()) >> 32];
    const uint32_t outcome = static_cast<uint32_t>(r) < e.threshold ? e.self : e.alias;
    return outcome < head_ ? outcome : SampleTail(rng);
  }

  // P(rank), normalized.
  double Probability(int64_t rank) const;

 private:
  ZipfSampler() = default;
  int64_t SampleTail(SplitMix64& rng) const;
  double H(double x) const;         // integral of x^-s: (x^(1-s) - 1) / (1-s)
  double HInverse(double y) const;
  double h(double x) const;         // x^-s

  int64_t n_ = 1;
  double s_ = 1;
  uint32_t head_ = 1;  // head ranks in the alias table; outcome head_ means "tail"
  double normalizer_ = 1;
  // The alias table, 8 bytes an entry so the tables of 26 features stay in L2 (the alias
  // method reads buckets uniformly at random, whatever the distribution).
  struct Entry {
    uint32_t threshold;  // take `self` when the low 32 random bits are below this
    uint16_t self;
    uint16_t alias;
  };
  std::vector<Entry> table_;
  // Rejection-inversion over 1-based ranks [head_ + 1, n_].
  double tail_h_lo_ = 0;  // H(lo + 0.5) - h(lo)
  double tail_h_n_ = 0;   // H(n + 0.5)
  double accept_ = 0;     // the paper's s: k - x <= s accepts at once
};

}  // namespace shardps

#endif  // SHARDPS_DATA_CTR_ZIPF_H_
