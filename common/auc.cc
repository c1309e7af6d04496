#include "common/auc.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

absl::Status CheckLabels(size_t num_scores, absl::Span<const float> labels,
                         int64_t* positives) {
  if (num_scores != labels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(num_scores, " scores but ", labels.size(), " labels"));
  }
  *positives = 0;
  for (size_t k = 0; k < labels.size(); ++k) {
    if (labels[k] == 1.0f) {
      ++*positives;
    } else if (labels[k] != 0.0f) {
      return absl::InvalidArgumentError(
          absl::StrCat("label ", k, " is ", labels[k], ", not 0 or 1"));
    }
  }
  return absl::OkStatus();
}

template <typename T>
absl::StatusOr<double> ExactAucImpl(absl::Span<const T> scores, absl::Span<const float> labels) {
  int64_t positives = 0;
  absl::Status status = CheckLabels(scores.size(), labels, &positives);
  if (!status.ok()) return status;
  const int64_t n = static_cast<int64_t>(scores.size());
  const int64_t negatives = n - positives;
  for (int64_t k = 0; k < n; ++k) {
    if (std::isnan(scores[k])) {
      return absl::InvalidArgumentError(absl::StrCat("score ", k, " is NaN"));
    }
  }
  if (positives == 0 || negatives == 0) {
    return absl::InvalidArgumentError(absl::StrCat("AUC needs both classes: ", positives,
                                                   " positives, ", negatives, " negatives"));
  }
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return scores[a] < scores[b]; });
  // Walk tie groups in ascending score: each positive beats every negative below its group
  // and half of those inside it.
  double correct_pairs = 0;
  int64_t negatives_below = 0;
  for (int64_t start = 0; start < n;) {
    int64_t end = start;
    int64_t pos = 0;
    int64_t neg = 0;
    while (end < n && scores[order[end]] == scores[order[start]]) {
      if (labels[order[end]] == 1.0f) {
        ++pos;
      } else {
        ++neg;
      }
      ++end;
    }
    correct_pairs += static_cast<double>(pos) * (negatives_below + 0.5 * neg);
    negatives_below += neg;
    start = end;
  }
  return correct_pairs / (static_cast<double>(positives) * static_cast<double>(negatives));
}

double ClippedLoss(double p, bool positive) {
  p = std::min(std::max(p, kLogLossEpsilon), 1.0 - kLogLossEpsilon);
  return positive ? -std::log(p) : -std::log1p(-p);
}

}  // namespace

absl::StatusOr<double> ExactAuc(absl::Span<const float> scores, absl::Span<const float> labels) {
  return ExactAucImpl(scores, labels);
}

absl::StatusOr<double> ExactAuc(absl::Span<const double> scores,
                                absl::Span<const float> labels) {
  return ExactAucImpl(scores, labels);
}

absl::StatusOr<double> MeanLogLoss(absl::Span<const float> probs,
                                   absl::Span<const float> labels) {
  int64_t positives = 0;
  absl::Status status = CheckLabels(probs.size(), labels, &positives);
  if (!status.ok()) return status;
  if (probs.empty()) return absl::InvalidArgumentError("log loss of no examples");
  double sum = 0;
  for (size_t k = 0; k < probs.size(); ++k) {
    if (std::isnan(probs[k])) {
      return absl::InvalidArgumentError(absl::StrCat("probability ", k, " is NaN"));
    }
    sum += ClippedLoss(probs[k], labels[k] == 1.0f);
  }
  return sum / static_cast<double>(probs.size());
}

AucAccumulator::AucAccumulator(int num_bins)
    : pos_(static_cast<size_t>(std::max(num_bins, 1)), 0),
      neg_(static_cast<size_t>(std::max(num_bins, 1)), 0) {}

void AucAccumulator::Add(float prob, float label) {
  if (std::isnan(prob)) {
    ++nan_count_;
    return;
  }
  const int bins = static_cast<int>(pos_.size());
  const double scaled = static_cast<double>(prob) * bins;
  const int bin = scaled <= 0 ? 0 : scaled >= bins ? bins - 1 : static_cast<int>(scaled);
  const bool positive = label > 0.5f;
  if (positive) {
    ++pos_[bin];
    ++positives_;
  } else {
    ++neg_[bin];
    ++negatives_;
  }
  log_loss_sum_ += ClippedLoss(prob, positive);
}

void AucAccumulator::Add(absl::Span<const float> probs, absl::Span<const float> labels) {
  const size_t n = std::min(probs.size(), labels.size());
  for (size_t k = 0; k < n; ++k) Add(probs[k], labels[k]);
}

absl::Status AucAccumulator::Merge(const AucAccumulator& other) {
  if (other.pos_.size() != pos_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot merge an AUC histogram of ",
                                                   other.pos_.size(), " bins into one of ",
                                                   pos_.size()));
  }
  for (size_t b = 0; b < pos_.size(); ++b) {
    pos_[b] += other.pos_[b];
    neg_[b] += other.neg_[b];
  }
  positives_ += other.positives_;
  negatives_ += other.negatives_;
  nan_count_ += other.nan_count_;
  log_loss_sum_ += other.log_loss_sum_;
  return absl::OkStatus();
}

double AucAccumulator::click_rate() const {
  return count() == 0 ? 0.0 : static_cast<double>(positives_) / count();
}

double AucAccumulator::Auc() const {
  if (positives_ == 0 || negatives_ == 0) return std::numeric_limits<double>::quiet_NaN();
  double correct_pairs = 0;
  int64_t negatives_below = 0;
  for (size_t b = 0; b < pos_.size(); ++b) {
    correct_pairs += static_cast<double>(pos_[b]) * (negatives_below + 0.5 * neg_[b]);
    negatives_below += neg_[b];
  }
  return correct_pairs / (static_cast<double>(positives_) * static_cast<double>(negatives_));
}

double AucAccumulator::LogLoss() const {
  return count() == 0 ? std::numeric_limits<double>::quiet_NaN()
                      : log_loss_sum_ / static_cast<double>(count());
}

}  // namespace shardps
