#include "ps_server/staleness.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace shardps {

StalenessPolicy StalenessPolicy::FromSpec(const UpdateSpec& spec) {
  StalenessPolicy policy;
  policy.lr = spec.staleness_lr();
  policy.lambda = static_cast<float>(spec.delay_compensation());
  policy.adaptive = spec.delay_compensation_adaptive();
  if (policy.compensates()) {
    policy.retained_versions =
        spec.retained_versions() > 0 ? spec.retained_versions() : kDefaultRetainedVersions;
  }
  return policy;
}

double StalenessPolicy::LrScale(int64_t staleness) const {
  if (lr != UpdateSpec::INVERSE || staleness <= 1) return 1.0;
  return 1.0 / static_cast<double>(staleness);
}

absl::Status ValidateStalenessSpec(const UpdateSpec& spec) {
  if (!UpdateSpec::StalenessLr_IsValid(spec.staleness_lr())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.staleness_lr ", static_cast<int>(spec.staleness_lr()), " is unknown"));
  }
  const double lambda = spec.delay_compensation();
  if (!(lambda >= 0) || lambda > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.delay_compensation must be >= 0 and finite in float32, got ", lambda));
  }
  if (spec.retained_versions() < 0 ||
      spec.retained_versions() > StalenessPolicy::kMaxRetainedVersions) {
    return absl::InvalidArgumentError(absl::StrCat("update.retained_versions must be 0..",
                                                   StalenessPolicy::kMaxRetainedVersions,
                                                   ", got ", spec.retained_versions()));
  }
  if (lambda == 0 && spec.delay_compensation_adaptive()) {
    return absl::InvalidArgumentError(
        "update.delay_compensation_adaptive needs update.delay_compensation > 0");
  }
  if (lambda == 0 && spec.retained_versions() != 0) {
    return absl::InvalidArgumentError(
        "update.retained_versions applies only with update.delay_compensation > 0");
  }
  const bool any = spec.staleness_lr() != UpdateSpec::NONE || lambda > 0;
  if (any && spec.mode() != UpdateSpec::ASYNC) {
    return absl::InvalidArgumentError(absl::StrCat(
        "update.", spec.staleness_lr() != UpdateSpec::NONE ? "staleness_lr" : "delay_compensation",
        " applies to ASYNC shards only (a SYNC step's gradients are never stale)"));
  }
  return absl::OkStatus();
}

void UpdateHistory::Enable() {
  if (ring_.empty()) ring_.resize(kCapacity);
}

void UpdateHistory::Record(int64_t version, int64_t begin, int64_t end) {
  if (ring_.empty()) return;
  ring_[next_] = Entry{version, begin, end};
  next_ = (next_ + 1) % ring_.size();
  count_ = std::min(count_ + 1, ring_.size());
}

int64_t UpdateHistory::Staleness(int64_t base, int64_t current, int64_t begin,
                                 int64_t end) const {
  if (base >= current) return 0;
  int64_t touching = 0;
  int64_t seen = 0;  // recorded updates after base
  for (size_t i = 0; i < count_; ++i) {
    const Entry& e = ring_[(next_ + ring_.size() - 1 - i) % ring_.size()];
    if (e.version > current) continue;
    if (e.version <= base) break;
    ++seen;
    if (e.begin < end && begin < e.end) ++touching;
  }
  // Updates after base that were not recorded (older than the history, or from before the
  // last Clear) may have touched anything.
  return touching + std::max<int64_t>(0, current - base - seen);
}

void UpdateHistory::Clear() {
  next_ = 0;
  count_ = 0;
}

void RetainedVersions::Retain(int64_t version, const ParamBlocks& params) {
  ParamBlocks view = params.ShareAll();
  if (!versions_.empty() && versions_.back().first == version) {
    versions_.back().second = std::move(view);
    return;
  }
  // A gap (the versions between were not retained) would make Find's answer for them wrong:
  // start afresh from this one.
  if (!versions_.empty() && versions_.back().first != version - 1) versions_.clear();
  versions_.emplace_back(version, std::move(view));
  while (static_cast<int>(versions_.size()) > capacity_) versions_.pop_front();
}

const ParamBlocks* RetainedVersions::Find(int64_t version, bool* exact) const {
  *exact = false;
  if (versions_.empty()) return nullptr;
  const int64_t oldest = versions_.front().first;
  if (version < oldest) return &versions_.front().second;
  const int64_t index = version - oldest;
  if (index >= static_cast<int64_t>(versions_.size())) return nullptr;
  *exact = true;
  return &versions_[static_cast<size_t>(index)].second;
}

int64_t RetainedVersions::ExtraBytes(const ParamBlocks& current) const {
  absl::flat_hash_set<const void*> counted;
  for (int64_t b = 0; b < current.num_blocks(); ++b) counted.insert(current.block_id(b));
  int64_t bytes = 0;
  for (const auto& [version, params] : versions_) {
    for (int64_t b = 0; b < params.num_blocks(); ++b) {
      if (counted.insert(params.block_id(b)).second) bytes += params.block_bytes(b);
    }
  }
  return bytes;
}

void DelayCompensate(const StalenessPolicy& policy, int64_t n, const float* g_in,
                     const float* now_in, const float* bak_in, float* mean_square_in,
                     float* out_in) {
  // Plain loops over restrict pointers, which GCC vectorizes (the BUILD file's copts).
  const float* __restrict g = g_in;
  const float* __restrict now = now_in;
  const float* __restrict bak = bak_in;
  float* __restrict ms = mean_square_in;
  float* __restrict out = out_in;
  const float lambda = policy.lambda;
  const float m = StalenessPolicy::kMeanSquareDecay;
  const float one_minus_m = 1.0f - m;
  const float epsilon = StalenessPolicy::kMeanSquareEpsilon;
  if (ms != nullptr && bak != nullptr && out != nullptr) {
    // One pass for both (a separate pass for the mean squares cost half as much again).
    for (int64_t i = 0; i < n; ++i) {
      const float mean_square = m * ms[i] + one_minus_m * g[i] * g[i];
      ms[i] = mean_square;
      const float l = lambda / (std::sqrt(mean_square) + epsilon);
      out[i] = g[i] + l * g[i] * g[i] * (now[i] - bak[i]);
    }
    return;
  }
  if (ms != nullptr) {
    for (int64_t i = 0; i < n; ++i) ms[i] = m * ms[i] + one_minus_m * g[i] * g[i];
  }
  if (out == nullptr) return;
  if (bak == nullptr) {
    std::copy(g, g + n, out);
    return;
  }
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] + lambda * g[i] * g[i] * (now[i] - bak[i]);
}

}  // namespace shardps
