#include "worker/own_gradient.h"

#include <algorithm>
#include <utility>

namespace shardps {

void PushProgress::Mark(uint64_t seq, uint64_t* prefix, std::set<uint64_t>* ahead) {
  if (seq <= *prefix) return;
  ahead->insert(seq);
  while (!ahead->empty() && *ahead->begin() == *prefix + 1) {
    ahead->erase(ahead->begin());
    ++*prefix;
  }
}

absl::StatusOr<std::unique_ptr<OwnGradient>> OwnGradient::Create(
    const OptimizerSpec& optimizer, absl::Span<const size_t> sizes) {
  absl::StatusOr<std::unique_ptr<Optimizer>> rule = Optimizer::Create(optimizer);
  if (!rule.ok()) return rule.status();
  std::unique_ptr<OwnGradient> own(new OwnGradient(*std::move(rule)));
  for (size_t n : sizes) {
    own->delta_.emplace_back(n);
    own->slots_.emplace_back();
    for (int k = 0; k < own->optimizer_->num_slots(); ++k) {
      own->slots_.back().emplace_back(n, own->optimizer_->initial_slot_value(k));
    }
  }
  return own;
}

OwnGradient::PullMark OwnGradient::PullStarted(bool gated) {
  PullMark mark;
  mark.gated = gated;
  absl::MutexLock lock(&mu_);
  if (gated) {
    auto no_push = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pushes_ == 0; };
    mu_.Await(absl::Condition(&no_push));
    ++gated_pulls_;
  }
  mark.done_before_start = progress_.done_prefix();
  return mark;
}

void OwnGradient::PullEnded(PullMark* mark) {
  absl::MutexLock lock(&mu_);
  mark->started_before_end = progress_.started_prefix();
  if (mark->gated) --gated_pulls_;
}

uint64_t OwnGradient::BeginCompute() { return ++computes_; }

bool OwnGradient::ApplyBefore(uint64_t seq, const PullMark& mark,
                              absl::Span<std::vector<float>> params) {
  // Only the previous compute's update is ever added: with two step slots, every earlier
  // step's push was done before this step's pull began.
  const uint64_t last = seq - 1;
  if (last == 0 || delta_seq_ != last) return false;
  // The pull began after `last`'s push was done, or ended after it began: for a gated pull
  // the second means the first (pulls and pushes do not overlap); for an ungated one the
  // pull may hold the update on some shards, and nothing is added.
  if (mark.done_before_start >= last || mark.started_before_end >= last) return false;
  for (size_t i = 0; i < params.size() && i < delta_.size(); ++i) {
    float* p = params[i].data();
    const float* d = delta_[i].data();
    const size_t n = std::min(params[i].size(), delta_[i].size());
    for (size_t k = 0; k < n; ++k) p[k] += d[k];
  }
  return true;
}

void OwnGradient::EndCompute(uint64_t seq, absl::Span<const std::vector<float>> grads, bool ok) {
  if (!ok) {
    delta_seq_ = 0;
    return;
  }
  ++updates_;
  for (size_t i = 0; i < grads.size() && i < delta_.size(); ++i) {
    // Every rule the ps implements (math/optimizer.h) makes an update that does not depend on
    // the parameters, so the update is the rule applied to zeros.
    std::vector<float>& delta = delta_[i];
    std::fill(delta.begin(), delta.end(), 0.0f);
    std::vector<float*> slots;
    for (std::vector<float>& slot : slots_[i]) slots.push_back(slot.data());
    optimizer_->ApplyDense(updates_, absl::MakeConstSpan(grads[i].data(), delta.size()),
                           delta.data(), slots);
  }
  delta_seq_ = seq;
}

void OwnGradient::PushStarting(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  auto no_pull = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return gated_pulls_ == 0; };
  mu_.Await(absl::Condition(&no_pull));
  ++pushes_;
  progress_.MarkStarted(seq);
}

void OwnGradient::PushEnded(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  --pushes_;
  progress_.MarkDone(seq);
}

void OwnGradient::Skip(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  progress_.MarkStarted(seq);
  progress_.MarkDone(seq);
}

}  // namespace shardps
