#include "data/ctr/zipf.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace shardps {
namespace {

// log1p(x) / x and expm1(x) / x, continuous at 0 (so s = 1 needs no special case).
double Log1pOverX(double x) {
  return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x / 3.0);
}
double Expm1OverX(double x) {
  return std::abs(x) > 1e-8 ? std::expm1(x) / x : 1.0 + x * (0.5 + x / 6.0);
}

}  // namespace

double ZipfSampler::h(double x) const { return std::exp(-s_ * std::log(x)); }

double ZipfSampler::H(double x) const {
  const double log_x = std::log(x);
  return Expm1OverX((1.0 - s_) * log_x) * log_x;
}

double ZipfSampler::HInverse(double y) const {
  double t = y * (1.0 - s_);
  if (t < -1.0) t = -1.0;  // only reachable by rounding at the very end of the range
  return std::exp(Log1pOverX(t) * y);
}

absl::StatusOr<ZipfSampler> ZipfSampler::Create(int64_t n, double s, int head) {
  if (n < 1 || n > (int64_t{1} << 62)) {
    return absl::InvalidArgumentError(absl::StrCat("zipf: n must be in [1, 2^62], got ", n));
  }
  if (!(s >= 0) || !std::isfinite(s)) {
    return absl::InvalidArgumentError(absl::StrCat("zipf: exponent must be >= 0, got ", s));
  }
  if (head < 1 || head > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("zipf: head must be in [1, 65535], got ", head));
  }
  ZipfSampler z;
  z.n_ = n;
  z.s_ = s;
  z.head_ = static_cast<uint32_t>(std::min<int64_t>(head, n));
  const bool has_tail = z.head_ < n;

  std::vector<double> mass(static_cast<size_t>(z.head_) + (has_tail ? 1 : 0));
  double head_sum = 0;
  for (uint32_t r = 0; r < z.head_; ++r) {
    mass[r] = z.h(static_cast<double>(r + 1));
    head_sum += mass[r];
  }
  double tail_sum = 0;
  if (has_tail) {
    // Euler-Maclaurin for sum_{k=a}^{b} k^-s: the integral, the end corrections, the f' and
    // f''' terms. a > 4096 in practice, so the next term is below 1e-20 of the sum.
    const double a = static_cast<double>(z.head_ + 1);
    const double b = static_cast<double>(n);
    auto d1 = [&](double x) { return -s * std::pow(x, -s - 1); };
    auto d3 = [&](double x) { return -s * (s + 1) * (s + 2) * std::pow(x, -s - 3); };
    tail_sum = (z.H(b) - z.H(a)) + (z.h(a) + z.h(b)) / 2 + (d1(b) - d1(a)) / 12 -
               (d3(b) - d3(a)) / 720;
    if (n - z.head_ <= 4096) {  // short tails: sum them exactly
      tail_sum = 0;
      for (int64_t k = z.head_ + 1; k <= n; ++k) tail_sum += z.h(static_cast<double>(k));
    }
    mass.back() = tail_sum;
    const double lo = a;
    z.tail_h_lo_ = z.H(lo + 0.5) - z.h(lo);
    z.tail_h_n_ = z.H(b + 0.5);
    z.accept_ = 2.0 - z.HInverse(z.H(2.5) - z.h(2.0));
  }
  z.normalizer_ = head_sum + tail_sum;

  // Vose's alias method, deterministic.
  const size_t m = mass.size();
  std::vector<double> threshold(m, 1.0);
  std::vector<size_t> alias(m);
  std::vector<double> scaled(m);
  std::vector<size_t> small;
  std::vector<size_t> large;
  for (size_t k = 0; k < m; ++k) {
    alias[k] = k;
    scaled[k] = mass[k] / z.normalizer_ * static_cast<double>(m);
    (scaled[k] < 1.0 ? small : large).push_back(k);
  }
  while (!small.empty() && !large.empty()) {
    const size_t l = small.back();
    small.pop_back();
    const size_t g = large.back();
    threshold[l] = scaled[l];
    alias[l] = g;
    scaled[g] = (scaled[g] + scaled[l]) - 1.0;
    if (scaled[g] < 1.0) {
      large.pop_back();
      small.push_back(g);
    }
  }
  // Leftovers (rounding) keep threshold 1: they always take themselves.
  z.table_.resize(m);
  for (size_t k = 0; k < m; ++k) {
    const double t = std::ldexp(threshold[k], 32);
    z.table_[k].threshold =
        t >= 4294967295.0 ? 0xffffffffu : static_cast<uint32_t>(std::llround(t));
    z.table_[k].self = static_cast<uint16_t>(k);
    z.table_[k].alias = static_cast<uint16_t>(alias[k]);
  }
  return z;
}

int64_t ZipfSampler::SampleTail(SplitMix64& rng) const {
  const double lo = static_cast<double>(head_ + 1);
  for (;;) {
    const double u = tail_h_n_ + rng.Uniform() * (tail_h_lo_ - tail_h_n_);
    const double x = HInverse(u);
    double k = std::floor(x + 0.5);
    if (k < lo) k = lo;
    if (k > static_cast<double>(n_)) k = static_cast<double>(n_);
    if (k - x <= accept_ || u >= H(k + 0.5) - h(k)) return static_cast<int64_t>(k) - 1;
  }
}

double ZipfSampler::Probability(int64_t rank) const {
  if (rank < 0 || rank >= n_) return 0;
  return h(static_cast<double>(rank + 1)) / normalizer_;
}

}  // namespace shardps
