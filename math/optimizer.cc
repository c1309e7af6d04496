#include "math/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "common/finite.h"
#include "common/status_macros.h"

namespace shardps {
namespace {

// TF's defaults, used when the field is 0.
constexpr double kDefaultInitialAccumulator = 0.1;
constexpr double kDefaultEpsilon = 1e-7;
constexpr double kDefaultBeta1 = 0.9;
constexpr double kDefaultBeta2 = 0.999;

constexpr double kDefaultLearningRatePower = -0.5;

double OrDefault(double v, double def) { return v == 0 ? def : v; }

// FTRL's power: unset takes TF's -0.5; any value given, 0 included, is used.
double FtrlPower(const OptimizerSpec& spec) {
  return spec.has_learning_rate_power() ? spec.learning_rate_power() : kDefaultLearningRatePower;
}

absl::Status CheckRange(double v, absl::string_view field, double lo, bool lo_open, double hi,
                        bool hi_open) {
  const bool ok = std::isfinite(v) && (lo_open ? v > lo : v >= lo) &&
                  (hi_open ? v < hi : v <= hi);
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "optimizer.", field, " must be in ", lo_open ? "(" : "[", lo, ", ",
      std::isinf(hi) ? std::string("inf") : absl::StrCat(hi), hi_open ? ")" : "]", ", got ", v));
}

constexpr double kInf = std::numeric_limits<double>::infinity();

// Whether x[0, n) are all finite: a float is NaN or infinite exactly when its exponent bits
// are all ones, and adding one to that field then carries into the sign bit. One OR over the
// tile, which the compiler vectorizes (common/finite.h finds the element after a miss).
inline bool TileFinite(const float* __restrict x, int64_t n) {
  uint32_t acc = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, x + i, sizeof(bits));
    acc |= (bits & 0x7f800000u) + 0x00800000u;
  }
  return (acc & 0x80000000u) == 0;
}

// Dense and lazy row-sparse applies for a Kernel that provides:
//   struct Coefficients;                       per-update constants (Adam's lr_t)
//   Coefficients Prepare(int64_t step) const;
//   void Update(const Coefficients&, int64_t n, const float* g, float* p,
//               float* const* slots) const;    n contiguous elements
// Keras' ExponentialDecay: lr * decay_rate ^ ((step - 1) / decay_steps), the exponent
// floored when `staircase`; no decay when decay_rate is 0 (unset). `step` counts the shard's
// updates from 1, so in sync mode the rate decays per sync step.
struct LearningRateDecay {
  double rate = 0;
  int64_t steps = 0;
  bool staircase = false;
  double Scale(int64_t step) const {
    if (rate == 0 || steps <= 0) return 1.0;
    double exponent = static_cast<double>(step - 1) / static_cast<double>(steps);
    if (staircase) exponent = std::floor(exponent);
    return std::pow(rate, exponent);
  }
};

template <typename Kernel, int kSlots>
class KernelOptimizer final : public Optimizer {
 public:
  KernelOptimizer(Kernel kernel, LearningRateDecay decay)
      : kernel_(std::move(kernel)), decay_(decay) {}

  int num_slots() const override { return kSlots; }
  float initial_slot_value(int slot) const override {
    return kernel_.initial_slot_value(slot);
  }

  void ApplyDenseScaled(int64_t step, double lr_scale, absl::Span<const float> grad,
                        float* params, absl::Span<float* const> slots) const override {
    const auto c = kernel_.Prepare(step, decay_.Scale(step) * lr_scale);
    kernel_.Update(c, static_cast<int64_t>(grad.size()), grad.data(), params, slots.data());
  }

  void ApplyRowsScaled(int64_t step, double lr_scale, absl::Span<const int64_t> rows,
                       const float* grad, const RowBlocks& params,
                       absl::Span<const RowBlocks> slots) const override {
    const auto c = kernel_.Prepare(step, decay_.Scale(step) * lr_scale);
    const int64_t width = params.width;
    float* row_slots[kMaxSlots] = {};
    // Random rows of a large table are each a cache miss: the rows a few ids ahead are
    // prefetched (for writing) so that their misses overlap the updates before them.
    constexpr size_t kAhead = 8;
    const size_t lines = std::min<size_t>(static_cast<size_t>(width) * sizeof(float), 256);
    for (size_t k = 0; k < rows.size(); ++k) {
      if (k + kAhead < rows.size()) {
        const int64_t ahead = rows[k + kAhead];
        const char* p = reinterpret_cast<const char*>(params.Row(ahead));
        for (size_t line = 0; line < lines; line += 64) __builtin_prefetch(p + line, 1);
        for (int s = 0; s < kSlots; ++s) {
          const char* q = reinterpret_cast<const char*>(slots[s].Row(ahead));
          for (size_t line = 0; line < lines; line += 64) __builtin_prefetch(q + line, 1);
        }
      }
      for (int s = 0; s < kSlots; ++s) row_slots[s] = slots[s].Row(rows[k]);
      kernel_.Update(c, width, grad + static_cast<int64_t>(k) * width, params.Row(rows[k]),
                     row_slots);
    }
  }

  int64_t FirstNonFiniteDense(int64_t step, double lr_scale, absl::Span<const float> grad,
                              const float* params,
                              absl::Span<const float* const> slots) const override {
    const auto c = kernel_.Prepare(step, decay_.Scale(step) * lr_scale);
    return FirstNonFiniteOf(c, static_cast<int64_t>(grad.size()), grad.data(), params,
                            slots.data());
  }

  int64_t FirstNonFiniteRows(int64_t step, double lr_scale, absl::Span<const int64_t> rows,
                             const float* grad, const RowBlocks& params,
                             absl::Span<const RowBlocks> slots) const override {
    const auto c = kernel_.Prepare(step, decay_.Scale(step) * lr_scale);
    const int64_t width = params.width;
    const float* row_slots[kMaxSlots] = {};
    // As ApplyRowsScaled: the rows a few ids ahead are prefetched (for writing: the update
    // that follows the check writes them), so that their misses overlap the checks before.
    constexpr size_t kAhead = 8;
    const size_t lines = std::min<size_t>(static_cast<size_t>(width) * sizeof(float), 256);
    for (size_t k = 0; k < rows.size(); ++k) {
      if (k + kAhead < rows.size()) {
        const int64_t ahead = rows[k + kAhead];
        const char* p = reinterpret_cast<const char*>(params.Row(ahead));
        for (size_t line = 0; line < lines; line += 64) __builtin_prefetch(p + line, 1);
        for (int s = 0; s < kSlots; ++s) {
          const char* q = reinterpret_cast<const char*>(slots[s].Row(ahead));
          for (size_t line = 0; line < lines; line += 64) __builtin_prefetch(q + line, 1);
        }
      }
      for (int s = 0; s < kSlots; ++s) row_slots[s] = slots[s].Row(rows[k]);
      const int64_t at = static_cast<int64_t>(k) * width;
      const int64_t bad = FirstNonFiniteOf(c, width, grad + at, params.Row(rows[k]), row_slots);
      if (bad < width) return at + bad;
    }
    return static_cast<int64_t>(rows.size()) * width;
  }

  std::optional<Ranges> RangesAfter(int64_t step, double lr_scale, double max_abs_grad,
                                    const Ranges& before) const override {
    if (!(max_abs_grad < kSafeMagnitude)) return std::nullopt;  // NaN too
    for (int s = 0; s <= kSlots; ++s) {
      if (!(std::fabs(before.lo[s]) < kSafeMagnitude && std::fabs(before.hi[s]) < kSafeMagnitude)) {
        return std::nullopt;
      }
    }
    const auto c = kernel_.Prepare(step, decay_.Scale(step) * lr_scale);
    std::optional<Ranges> after = kernel_.RangesAfter(c, max_abs_grad, before);
    if (!after.has_value()) return std::nullopt;
    for (int s = 0; s <= kSlots; ++s) {
      if (!(std::fabs(after->lo[s]) < kSafeMagnitude && std::fabs(after->hi[s]) < kSafeMagnitude)) {
        return std::nullopt;
      }
    }
    return after;
  }

  absl::string_view slot_name(int slot) const override { return kernel_.slot_name(slot); }

 private:
  // The update of n elements computed on copies, a tile at a time (in L1), and the first
  // element whose parameter or a slot came out non-finite (n: none).
  template <typename Coefficients>
  int64_t FirstNonFiniteOf(const Coefficients& c, int64_t n, const float* grad,
                           const float* params, const float* const* slots) const {
    constexpr int64_t kTile = 1024;  // 12 KiB with two slots: in L1
    alignas(64) float p[kTile];
    alignas(64) float s[kMaxSlots][kTile];
    float* const tile_slots[kMaxSlots] = {s[0], s[1]};
    for (int64_t begin = 0; begin < n; begin += kTile) {
      const int64_t m = std::min(kTile, n - begin);
      const size_t bytes = static_cast<size_t>(m) * sizeof(float);
      std::memcpy(p, params + begin, bytes);
      for (int j = 0; j < kSlots; ++j) std::memcpy(s[j], slots[j] + begin, bytes);
      kernel_.Update(c, m, grad + begin, p, tile_slots);
      bool finite = TileFinite(p, m);
      for (int j = 0; j < kSlots; ++j) finite = finite && TileFinite(s[j], m);
      if (finite) continue;
      int64_t bad = FirstNonFinite(p, m);
      for (int j = 0; j < kSlots; ++j) bad = std::min(bad, FirstNonFinite(s[j], m));
      return begin + bad;
    }
    return n;
  }

  const Kernel kernel_;
  const LearningRateDecay decay_;
};

// The learning rate of one update, after decay.
struct LrCoefficients {
  float lr;
};

// The kernels are plain loops over contiguous floats with restrict pointers, which GCC turns
// into SIMD code (the BUILD file adds -fno-math-errno so that sqrt vectorizes, and
// -ffp-contract=off). Every operation is correctly rounded IEEE arithmetic, so an element's
// result does not depend on whether it went through the vector body or the scalar tail:
// a row updated through ApplyRows is bit-identical to the same row updated through
// ApplyDense. (Eigen's packet sqrt is an approximation under EIGEN_FAST_MATH, which broke
// exactly that.)

struct NoopKernel {
  float initial_slot_value(int) const { return 0.0f; }
  absl::string_view slot_name(int) const { return ""; }
  LrCoefficients Prepare(int64_t, double) const { return {0.0f}; }
  void Update(const LrCoefficients&, int64_t, const float*, float*, float* const*) const {}
  std::optional<Optimizer::Ranges> RangesAfter(const LrCoefficients&, double,
                                               const Optimizer::Ranges& before) const {
    return before;
  }
};

// For the kernels' RangesAfter: [lo, hi] widened by `by` on both sides.
void Widen(Optimizer::Ranges* r, int i, double by) {
  r->lo[i] -= by;
  r->hi[i] += by;
}
double Magnitude(const Optimizer::Ranges& r, int i) {
  return std::max(std::fabs(r.lo[i]), std::fabs(r.hi[i]));
}
// Relative slack for float rounding in the kernels' arithmetic (each result is within a few
// ulps, 2^-24 each, of the real number the bounds bound).
constexpr double kRoundingSlack = 1.001;

struct SgdKernel {
  float lr;
  float initial_slot_value(int) const { return 0.0f; }
  absl::string_view slot_name(int) const { return ""; }
  LrCoefficients Prepare(int64_t, double scale) const {
    return {static_cast<float>(lr * scale)};
  }
  void Update(const LrCoefficients& c, int64_t n, const float* __restrict g,
              float* __restrict p, float* const*) const {
    const float lr_ = c.lr;
    for (int64_t i = 0; i < n; ++i) p[i] -= lr_ * g[i];
  }
  // p - lr * g.
  std::optional<Optimizer::Ranges> RangesAfter(const LrCoefficients& c, double g,
                                               const Optimizer::Ranges& before) const {
    Optimizer::Ranges r = before;
    Widen(&r, 0, std::fabs(c.lr) * g * kRoundingSlack);
    return r;
  }
};

struct MomentumKernel {
  float lr;
  float momentum;
  bool nesterov;
  float initial_slot_value(int) const { return 0.0f; }
  absl::string_view slot_name(int) const { return "momentum"; }
  LrCoefficients Prepare(int64_t, double scale) const {
    return {static_cast<float>(lr * scale)};
  }
  void Update(const LrCoefficients& c, int64_t n, const float* __restrict g,
              float* __restrict p, float* const* slots) const {
    float* __restrict v = slots[0];
    const float lr_ = c.lr;
    const float m = momentum;
    if (nesterov) {
      for (int64_t i = 0; i < n; ++i) {
        const float vi = m * v[i] - lr_ * g[i];
        v[i] = vi;
        p[i] += m * vi - lr_ * g[i];
      }
    } else {
      for (int64_t i = 0; i < n; ++i) {
        const float vi = m * v[i] - lr_ * g[i];
        v[i] = vi;
        p[i] += vi;
      }
    }
  }
  // v' = m v - lr g; p + v' (Nesterov: p + m v' - lr g).
  std::optional<Optimizer::Ranges> RangesAfter(const LrCoefficients& c, double g,
                                               const Optimizer::Ranges& before) const {
    const double lr_g = std::fabs(c.lr) * g;
    const double v_new = (std::fabs(momentum) * Magnitude(before, 1) + lr_g) * kRoundingSlack;
    Optimizer::Ranges r = before;
    r.lo[1] = std::min(r.lo[1], -v_new);
    r.hi[1] = std::max(r.hi[1], v_new);
    Widen(&r, 0, (nesterov ? std::fabs(momentum) * v_new + lr_g : v_new) * kRoundingSlack);
    return r;
  }
};

struct AdagradKernel {
  float lr;
  float epsilon;
  float initial_accumulator;
  float initial_slot_value(int) const { return initial_accumulator; }
  absl::string_view slot_name(int) const { return "accumulator"; }
  LrCoefficients Prepare(int64_t, double scale) const {
    return {static_cast<float>(lr * scale)};
  }
  void Update(const LrCoefficients& c, int64_t n, const float* __restrict g,
              float* __restrict p, float* const* slots) const {
    float* __restrict acc = slots[0];
    const float lr_ = c.lr;
    const float eps = epsilon;
    for (int64_t i = 0; i < n; ++i) {
      const float a = acc[i] + g[i] * g[i];
      acc[i] = a;
      p[i] -= lr_ * g[i] / (std::sqrt(a) + eps);
    }
  }
  // a' = a + g^2 (needs a >= 0, so that sqrt(a') >= |g|); |g| / (sqrt(a') + eps) <= 1 unless
  // g * g underflows (|g| < 2^-63), and <= |g| / eps always.
  std::optional<Optimizer::Ranges> RangesAfter(const LrCoefficients& c, double g,
                                               const Optimizer::Ranges& before) const {
    if (before.lo[1] < 0 || !(g * g < Optimizer::kSafeMagnitude)) return std::nullopt;
    const double eps = epsilon;
    const double ratio = std::min(g / eps, std::max(1.0, 1.1e-19 / eps)) * kRoundingSlack;
    Optimizer::Ranges r = before;
    r.hi[1] = (before.hi[1] + g * g) * kRoundingSlack;
    Widen(&r, 0, std::fabs(c.lr) * ratio * kRoundingSlack);
    return r;
  }
};

struct AdamKernel {
  float lr;
  double beta1;
  double beta2;
  float epsilon;
  struct Coefficients {
    float lr_t;
  };
  float initial_slot_value(int) const { return 0.0f; }
  absl::string_view slot_name(int slot) const { return slot == 0 ? "adam_m" : "adam_v"; }
  Coefficients Prepare(int64_t step, double scale) const {
    const double t = static_cast<double>(step);
    const double lr_t =
        lr * scale * std::sqrt(1.0 - std::pow(beta2, t)) / (1.0 - std::pow(beta1, t));
    return {static_cast<float>(lr_t)};
  }
  void Update(const Coefficients& c, int64_t n, const float* __restrict g,
              float* __restrict p, float* const* slots) const {
    float* __restrict m = slots[0];
    float* __restrict v = slots[1];
    const float b1 = static_cast<float>(beta1);
    const float b2 = static_cast<float>(beta2);
    const float one_minus_b1 = 1.0f - b1;
    const float one_minus_b2 = 1.0f - b2;
    const float lr_t = c.lr_t;
    const float eps = epsilon;
#if defined(__AVX2__) && defined(__FMA__)
    // 8 lanes at a time; the last n % 8 values go through the same lanes from a padded copy,
    // so every element gets the same arithmetic wherever an update's range is split (chunks,
    // threads), and a sync run stays bit-reproducible.
    const Lanes lanes(b1, b2, one_minus_b1, one_minus_b2, lr_t, eps);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) lanes.Update(g + i, p + i, m + i, v + i);
    if (i < n) {
      alignas(32) float tg[8] = {}, tp[8] = {}, tm[8] = {}, tv[8] = {};
      const size_t rest = static_cast<size_t>(n - i) * sizeof(float);
      std::memcpy(tg, g + i, rest);
      std::memcpy(tp, p + i, rest);
      std::memcpy(tm, m + i, rest);
      std::memcpy(tv, v + i, rest);
      lanes.Update(tg, tp, tm, tv);
      std::memcpy(p + i, tp, rest);
      std::memcpy(m + i, tm, rest);
      std::memcpy(v + i, tv, rest);
    }
#else
    for (int64_t i = 0; i < n; ++i) {
      const float mi = b1 * m[i] + one_minus_b1 * g[i];
      const float vi = b2 * v[i] + one_minus_b2 * g[i] * g[i];
      m[i] = mi;
      v[i] = vi;
      p[i] -= lr_t * mi / (std::sqrt(vi) + eps);
    }
#endif
  }

  // m' = b1 m + (1 - b1) g; v' = b2 v + (1 - b2) g^2 (needs v >= 0); p - lr_t m' / (sqrt(v')
  // + eps), whose step is at most lr_t |m'| / eps.
  std::optional<Optimizer::Ranges> RangesAfter(const Coefficients& c, double g,
                                               const Optimizer::Ranges& before) const {
    if (before.lo[2] < 0 || !(g * g < Optimizer::kSafeMagnitude)) return std::nullopt;
    const double m_new = (beta1 * Magnitude(before, 1) + (1 - beta1) * g) * kRoundingSlack;
    Optimizer::Ranges r = before;
    r.lo[1] = std::min(r.lo[1], -m_new);
    r.hi[1] = std::max(r.hi[1], m_new);
    r.lo[2] = before.lo[2] * beta2;  // >= 0, and below lo
    r.hi[2] = std::max(before.hi[2], (beta2 * before.hi[2] + (1 - beta2) * g * g) * kRoundingSlack);
    Widen(&r, 0, std::fabs(c.lr_t) * m_new / static_cast<double>(epsilon) * kRoundingSlack);
    return r;
  }

#if defined(__AVX2__) && defined(__FMA__)
  // Adam on 8 floats. The division lr_t * m / (sqrt(v) + eps) is the costly part (the
  // compiler's loop, with vdivps, ran at half the speed of this one): the reciprocal comes
  // from rcpps refined by one Newton step (relative error ~1e-7, far inside the 1e-5 the
  // reference tests allow). Where a denominator is outside the range in which that is valid
  // (a tiny epsilon, or v overflowed to infinity), the lanes are divided exactly instead.
  struct Lanes {
    Lanes(float b1, float b2, float one_minus_b1, float one_minus_b2, float lr_t, float eps)
        : b1(_mm256_set1_ps(b1)),
          b2(_mm256_set1_ps(b2)),
          c1(_mm256_set1_ps(one_minus_b1)),
          c2(_mm256_set1_ps(one_minus_b2)),
          lr(_mm256_set1_ps(lr_t)),
          eps(_mm256_set1_ps(eps)) {}

    void Update(const float* g, float* p, float* m, float* v) const {
      const __m256 G = _mm256_loadu_ps(g);
      const __m256 M = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m), _mm256_mul_ps(c1, G));
      const __m256 V =
          _mm256_fmadd_ps(b2, _mm256_loadu_ps(v), _mm256_mul_ps(_mm256_mul_ps(c2, G), G));
      const __m256 D = _mm256_add_ps(_mm256_sqrt_ps(V), eps);
      const __m256 step = _mm256_mul_ps(lr, M);
      __m256 update;
      const __m256 in_range = _mm256_and_ps(_mm256_cmp_ps(D, _mm256_set1_ps(1e-37f), _CMP_GE_OQ),
                                            _mm256_cmp_ps(D, _mm256_set1_ps(1e37f), _CMP_LE_OQ));
      if (_mm256_movemask_ps(in_range) == 0xff) {
        __m256 R = _mm256_rcp_ps(D);
        R = _mm256_mul_ps(R, _mm256_fnmadd_ps(D, R, _mm256_set1_ps(2.0f)));
        update = _mm256_mul_ps(step, R);
      } else {
        update = _mm256_div_ps(step, D);
      }
      _mm256_storeu_ps(m, M);
      _mm256_storeu_ps(v, V);
      _mm256_storeu_ps(p, _mm256_sub_ps(_mm256_loadu_ps(p), update));
    }

    const __m256 b1, b2, c1, c2, lr, eps;
  };
#endif
};

// FTRL-Proximal, TF's ApplyFtrlV2 per element (lr is this update's rate after decay and
// scale; l2 already holds Keras' l2 + beta / (2 * lr)):
//   g_s = g + 2 * l2_shrinkage * p                     (g when l2_shrinkage is 0: TF's V1 op)
//   acc_new = acc + g * g
//   linear += g_s - (acc_new^(-power) - acc^(-power)) / lr * p
//   quadratic = acc_new^(-power) / lr + 2 * l2
//   p = |linear| > l1 ? (sign(linear) * l1 - linear) / quadratic : 0
//   acc = acc_new
// power -0.5 (the default) takes sqrt, as TF does; others std::pow.
struct FtrlKernel {
  float lr;
  double power;
  float l1;
  float l2;
  float l2_shrinkage;
  float beta;
  float initial_accumulator;
  struct Coefficients {
    float lr;
    float l2;  // adjusted by beta
  };
  float initial_slot_value(int slot) const { return slot == 0 ? initial_accumulator : 0.0f; }
  absl::string_view slot_name(int slot) const { return slot == 0 ? "accumulator" : "linear"; }
  // Its powers and divisions are not bounded here: the exact check decides every update.
  std::optional<Optimizer::Ranges> RangesAfter(const Coefficients&, double,
                                               const Optimizer::Ranges&) const {
    return std::nullopt;
  }
  Coefficients Prepare(int64_t, double scale) const {
    const float lr_t = static_cast<float>(lr * scale);
    return {lr_t, beta == 0.0f ? l2 : l2 + beta / (2.0f * lr_t)};
  }
  void Update(const Coefficients& c, int64_t n, const float* __restrict g, float* __restrict p,
              float* const* slots) const {
    float* __restrict acc = slots[0];
    float* __restrict linear = slots[1];
    const float lr_ = c.lr;
    const float two_l2 = 2.0f * c.l2;
    const float l1_ = l1;
    const float two_shrinkage = 2.0f * l2_shrinkage;
    const bool shrink = l2_shrinkage > 0.0f;
    if (power == -0.5) {
      for (int64_t i = 0; i < n; ++i) {
        const float gs = shrink ? g[i] + two_shrinkage * p[i] : g[i];
        const float a = acc[i];
        const float a_new = a + g[i] * g[i];
        const float s_new = std::sqrt(a_new);
        const float l = linear[i] + (gs - (s_new - std::sqrt(a)) / lr_ * p[i]);
        linear[i] = l;
        const float quadratic = s_new / lr_ + two_l2;
        const float x = (l < 0.0f ? -l1_ : l1_) - l;
        p[i] = std::fabs(l) > l1_ ? x / quadratic : 0.0f;
        acc[i] = a_new;
      }
    } else {
      const float neg_power = static_cast<float>(-power);
      for (int64_t i = 0; i < n; ++i) {
        const float gs = shrink ? g[i] + two_shrinkage * p[i] : g[i];
        const float a = acc[i];
        const float a_new = a + g[i] * g[i];
        const float s_new = std::pow(a_new, neg_power);
        const float l = linear[i] + (gs - (s_new - std::pow(a, neg_power)) / lr_ * p[i]);
        linear[i] = l;
        const float quadratic = s_new / lr_ + two_l2;
        const float x = (l < 0.0f ? -l1_ : l1_) - l;
        p[i] = std::fabs(l) > l1_ ? x / quadratic : 0.0f;
        acc[i] = a_new;
      }
    }
  }
};

}  // namespace

absl::Status Optimizer::Validate(const OptimizerSpec& spec) {
  switch (spec.type()) {
    case OptimizerSpec::SGD:
    case OptimizerSpec::MOMENTUM:
    case OptimizerSpec::ADAGRAD:
    case OptimizerSpec::ADAM:
    case OptimizerSpec::NOOP:
    case OptimizerSpec::FTRL:
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("optimizer.type ", static_cast<int>(spec.type()), " is unknown"));
  }
  RETURN_IF_ERROR(CheckRange(spec.learning_rate(), "learning_rate", 0, true, kInf, true));
  if (spec.decay_rate() != 0 || spec.decay_steps() != 0) {
    RETURN_IF_ERROR(CheckRange(spec.decay_rate(), "decay_rate", 0, true, 1, false));
    if (spec.decay_steps() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "optimizer.decay_steps must be > 0 with decay_rate, got ", spec.decay_steps()));
    }
  }
  switch (spec.type()) {
    case OptimizerSpec::MOMENTUM:
      RETURN_IF_ERROR(CheckRange(spec.momentum(), "momentum", 0, false, 1, true));
      break;
    case OptimizerSpec::ADAGRAD:
      RETURN_IF_ERROR(CheckRange(
          OrDefault(spec.initial_accumulator_value(), kDefaultInitialAccumulator),
          "initial_accumulator_value", 0, false, kInf, true));
      RETURN_IF_ERROR(CheckRange(OrDefault(spec.epsilon(), kDefaultEpsilon), "epsilon", 0,
                                 false, kInf, true));
      break;
    case OptimizerSpec::ADAM:
      RETURN_IF_ERROR(
          CheckRange(OrDefault(spec.beta1(), kDefaultBeta1), "beta1", 0, false, 1, true));
      RETURN_IF_ERROR(
          CheckRange(OrDefault(spec.beta2(), kDefaultBeta2), "beta2", 0, false, 1, true));
      RETURN_IF_ERROR(CheckRange(OrDefault(spec.epsilon(), kDefaultEpsilon), "epsilon", 0,
                                 false, kInf, true));
      break;
    case OptimizerSpec::FTRL:
      RETURN_IF_ERROR(CheckRange(
          OrDefault(spec.initial_accumulator_value(), kDefaultInitialAccumulator),
          "initial_accumulator_value", 0, false, kInf, true));
      RETURN_IF_ERROR(CheckRange(FtrlPower(spec), "learning_rate_power", -kInf, true, 0, false));
      RETURN_IF_ERROR(CheckRange(spec.l1(), "l1", 0, false, kInf, true));
      RETURN_IF_ERROR(CheckRange(spec.l2(), "l2", 0, false, kInf, true));
      RETURN_IF_ERROR(CheckRange(spec.l2_shrinkage(), "l2_shrinkage", 0, false, kInf, true));
      RETURN_IF_ERROR(CheckRange(spec.beta(), "beta", 0, false, kInf, true));
      break;
    default:
      break;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Optimizer>> Optimizer::Create(const OptimizerSpec& spec) {
  RETURN_IF_ERROR(Validate(spec));
  const float lr = static_cast<float>(spec.learning_rate());
  const LearningRateDecay decay{spec.decay_rate(), spec.decay_steps(), spec.staircase()};
  switch (spec.type()) {
    case OptimizerSpec::SGD:
      return std::unique_ptr<Optimizer>(new KernelOptimizer<SgdKernel, 0>(SgdKernel{lr}, decay));
    case OptimizerSpec::MOMENTUM:
      return std::unique_ptr<Optimizer>(new KernelOptimizer<MomentumKernel, 1>(
          MomentumKernel{lr, static_cast<float>(spec.momentum()), spec.nesterov()}, decay));
    case OptimizerSpec::ADAGRAD:
      return std::unique_ptr<Optimizer>(new KernelOptimizer<AdagradKernel, 1>(AdagradKernel{
          lr, static_cast<float>(OrDefault(spec.epsilon(), kDefaultEpsilon)),
          static_cast<float>(
              OrDefault(spec.initial_accumulator_value(), kDefaultInitialAccumulator))},
          decay));
    case OptimizerSpec::ADAM:
      return std::unique_ptr<Optimizer>(new KernelOptimizer<AdamKernel, 2>(AdamKernel{
          lr, OrDefault(spec.beta1(), kDefaultBeta1), OrDefault(spec.beta2(), kDefaultBeta2),
          static_cast<float>(OrDefault(spec.epsilon(), kDefaultEpsilon))},
          decay));
    case OptimizerSpec::NOOP:
      return std::unique_ptr<Optimizer>(new KernelOptimizer<NoopKernel, 0>(NoopKernel{}, decay));
    case OptimizerSpec::FTRL:
      return std::unique_ptr<Optimizer>(new KernelOptimizer<FtrlKernel, 2>(
          FtrlKernel{lr, FtrlPower(spec), static_cast<float>(spec.l1()),
                     static_cast<float>(spec.l2()), static_cast<float>(spec.l2_shrinkage()),
                     static_cast<float>(spec.beta()),
                     static_cast<float>(OrDefault(spec.initial_accumulator_value(),
                                                  kDefaultInitialAccumulator))},
          decay));
    default:
      return absl::InvalidArgumentError("unreachable: optimizer.type validated above");
  }
}

}  // namespace shardps
