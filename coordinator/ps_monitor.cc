#include "coordinator/ps_monitor.h"

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace shardps {

PsMonitor::PsMonitor(PsClient* ps, Options options, std::function<void()> on_change)
    : ps_(ps),
      options_(options),
      on_change_(std::move(on_change)),
      views_(static_cast<size_t>(ps->num_ps())),
      thread_([this] { Loop(); }) {}

PsMonitor::~PsMonitor() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

std::vector<PsMonitor::PsView> PsMonitor::Views() const {
  absl::MutexLock lock(&mu_);
  return views_;
}

void PsMonitor::ProbeNow() {
  absl::MutexLock lock(&mu_);
  wake_ = true;
}

void PsMonitor::Reset() {
  const size_t n = static_cast<size_t>(ps_->num_ps());
  absl::MutexLock lock(&mu_);
  views_.assign(n, PsView());
  ++epoch_;
  wake_ = true;
}

void PsMonitor::Loop() {
  absl::Duration interval = options_.interval;
  while (true) {
    int64_t epoch = 0;
    {
      absl::MutexLock lock(&mu_);
      epoch = epoch_;
    }
    std::vector<absl::Status> statuses;
    std::vector<HealthResponse> responses;
    const absl::Time sent = absl::Now();
    ps_->HealthEach(/*from_chief=*/true, options_.probe_timeout, &statuses, &responses);
    const absl::Time now = absl::Now();
    bool changed = false;
    bool any_down = false;
    {
      absl::MutexLock lock(&mu_);
      // A probe of another ps set than the views' (a Reset came meanwhile) tells nothing.
      if (epoch != epoch_) statuses.clear();
      for (size_t k = 0; k < views_.size() && k < statuses.size(); ++k) {
        PsView& v = views_[k];
        if (statuses[k].ok()) {
          const HealthResponse& h = responses[k];
          if (!v.up || v.incarnation != h.incarnation() || v.generation != h.generation()) {
            changed = true;
            if (!v.up && v.probed) {
              LogInfo() << "ps " << k << " is reachable again"
                        << (v.incarnation != h.incarnation() ? " (restarted)" : "");
            }
          }
          v.probed = true;
          v.up = true;
          v.incarnation = h.incarnation();
          v.generation = h.generation();
          v.bytes = h.bytes();
          v.memory_available_bytes = h.memory_available_bytes();
          v.last_up = now;
          v.last_up_sent = sent;
          v.failing_since = absl::InfiniteFuture();
          v.error.clear();
        } else {
          if (v.failing_since == absl::InfiniteFuture()) v.failing_since = now;
          v.error = std::string(statuses[k].message());
          // Never seen up: unreachable from the first failure (the chief waits for it anyway).
          const bool down = !v.probed || now - v.failing_since >= options_.unreachable_after;
          if (down && v.up) {
            changed = true;
            LogWarning() << "ps " << k << " unreachable: " << v.error;
          }
          if (down) v.up = false;
          any_down |= !v.up;
        }
      }
      interval = any_down ? std::min(interval * 2, options_.max_interval) : options_.interval;
      if (changed) interval = options_.interval;
    }
    if (changed && on_change_) on_change_();
    absl::MutexLock lock(&mu_);
    auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return wake_ || stop_; };
    mu_.AwaitWithTimeout(absl::Condition(&woken), interval);
    if (stop_) return;
    wake_ = false;
  }
}

}  // namespace shardps
