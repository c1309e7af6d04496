// Binary-classification metrics for click models: exact ROC AUC, mean log loss, and a
// mergeable streaming accumulator (for an evaluator that sums over batches or workers).
//
// Exact AUC sorts the scores: the fraction of (positive, negative) pairs that the score puts
// in the right order, a tie counting half (the Mann-Whitney U statistic / (P * N)).
// AucAccumulator bins probabilities into a fixed histogram, so it is O(bins) memory,
// mergeable, and approximate: pairs whose scores fall in the same bin count half, so its AUC
// differs from the exact one by at most half the fraction of (pos, neg) pairs sharing a bin
// (with the default 2^16 bins, typically below 1e-4). Its log loss is exact.
//
// Thread-safety: the functions are pure; an AucAccumulator is not thread-safe (one per
// thread, then Merge).
#ifndef SHARDPS_COMMON_AUC_H_
#define SHARDPS_COMMON_AUC_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace shardps {

// Exact ROC AUC of `scores` (any real order-preserving score) against `labels` (0 or 1).
// INVALID_ARGUMENT when the sizes differ, a label is not 0/1, a score is NaN, or either class
// is absent (AUC is undefined then; the message gives both counts).
absl::StatusOr<double> ExactAuc(absl::Span<const float> scores, absl::Span<const float> labels);
absl::StatusOr<double> ExactAuc(absl::Span<const double> scores,
                                absl::Span<const float> labels);

// Probabilities are clipped into [eps, 1 - eps] for the log.
inline constexpr double kLogLossEpsilon = 1e-7;

// Mean binary cross-entropy -[y log p + (1-y) log(1-p)] of probabilities `probs`.
// INVALID_ARGUMENT when the sizes differ, a label is not 0/1, a probability is NaN, or the
// input is empty.
absl::StatusOr<double> MeanLogLoss(absl::Span<const float> probs, absl::Span<const float> labels);

class AucAccumulator {
 public:
  static constexpr int kDefaultBins = 1 << 16;

  // Bins cover [0, 1] evenly; probabilities outside it go to the end bins.
  explicit AucAccumulator(int num_bins = kDefaultBins);

  // Adds one (probability, label) pair; a label > 0.5 counts as positive. NaN probabilities
  // are counted in nan_count() and otherwise ignored.
  void Add(float prob, float label);
  void Add(absl::Span<const float> probs, absl::Span<const float> labels);

  // INVALID_ARGUMENT when the bin counts differ.
  absl::Status Merge(const AucAccumulator& other);

  int64_t positives() const { return positives_; }
  int64_t negatives() const { return negatives_; }
  int64_t count() const { return positives_ + negatives_; }
  int64_t nan_count() const { return nan_count_; }
  // Fraction of positives; 0 when empty.
  double click_rate() const;
  // Approximate AUC (see the file comment); NaN when either class is absent.
  double Auc() const;
  // Exact mean log loss (clipped as MeanLogLoss); NaN when empty.
  double LogLoss() const;

 private:
  std::vector<int64_t> pos_;
  std::vector<int64_t> neg_;
  int64_t positives_ = 0;
  int64_t negatives_ = 0;
  int64_t nan_count_ = 0;
  double log_loss_sum_ = 0;
};

}  // namespace shardps

#endif  // SHARDPS_COMMON_AUC_H_
