// OwnGradient: a worker's own last update, for a step whose parameters were pulled without it.
//
// With two steps in flight (JobSpec.steps_in_flight) a worker pulls step B's parameters while
// it computes step A, so B's pull may lack A's update. After A computes, this class runs the
// job's optimizer rule on A's gradient with slots of its own (which see this worker's
// gradients only; Adam's t and the learning rate decay count them too) and keeps the update;
// before B computes, it adds that update to B's parameters when B's pull surely lacked it.
// The ps still applies A's gradient once, as pushed. With one worker B then computes on
// exactly what a run with one step in flight would; with several it is an estimate.
//
// B's pull is known to lack A's update because a gated pull (one that waits for no version)
// waits for the job's pushes in flight before it goes out, and a push waits for the gated
// pulls in flight (PullStarted, PushStarting). A pull that waits for a version (stale mode's
// min_version) is not gated, since a push waiting for it could wait for itself; its step gets
// the update only when A's push had not begun by the time the pull ended.
//
// Thread-safety: PullStarted, PullEnded, PushStarting, PushEnded and Skip may be called from
// any thread. BeginCompute, ApplyBefore and EndCompute run on the worker's compute thread
// only, one step at a time.
#ifndef SHARDPS_WORKER_OWN_GRADIENT_H_
#define SHARDPS_WORKER_OWN_GRADIENT_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "math/optimizer.h"
#include "proto/ps.pb.h"

namespace shardps {

// Steps numbered from 1 in the order they compute, and how far their pushes have got: every
// step up to started_prefix() has begun its push (or will never push), every step up to
// done_prefix() has finished it. Each step is marked once; the prefixes skip no step.
// Not thread-safe.
class PushProgress {
 public:
  void MarkStarted(uint64_t seq) { Mark(seq, &started_prefix_, &started_ahead_); }
  void MarkDone(uint64_t seq) { Mark(seq, &done_prefix_, &done_ahead_); }
  uint64_t started_prefix() const { return started_prefix_; }
  uint64_t done_prefix() const { return done_prefix_; }

 private:
  static void Mark(uint64_t seq, uint64_t* prefix, std::set<uint64_t>* ahead);

  uint64_t started_prefix_ = 0;
  uint64_t done_prefix_ = 0;
  std::set<uint64_t> started_ahead_;
  std::set<uint64_t> done_ahead_;
};

class OwnGradient {
 public:
  // For variables of `sizes` elements each, updated on the ps by `optimizer`.
  // INVALID_ARGUMENT for an optimizer spec the ps would refuse.
  static absl::StatusOr<std::unique_ptr<OwnGradient>> Create(const OptimizerSpec& optimizer,
                                                             absl::Span<const size_t> sizes);

  // What a step's pull knew of the job's pushes.
  struct PullMark {
    bool gated = false;
    uint64_t done_before_start = 0;    // pushes done before the pull began (a prefix)
    uint64_t started_before_end = 0;   // pushes begun before the pull ended (a prefix)
  };

  // Before a step's pull goes out. A gated pull first waits for the pushes in flight.
  PullMark PullStarted(bool gated);
  // When the pull has ended (in its callback, before the step can compute).
  void PullEnded(PullMark* mark);

  // The next compute's sequence number. Compute thread.
  uint64_t BeginCompute();
  // Adds the previous compute's update to `params` (one buffer per variable) when the pull
  // `mark` surely lacked it. Returns whether it did. Compute thread, before step `seq`
  // computes.
  bool ApplyBefore(uint64_t seq, const PullMark& mark, absl::Span<std::vector<float>> params);
  // Step `seq` computed `grads` (ok), or failed (!ok: no update is kept for the next step).
  // Compute thread.
  void EndCompute(uint64_t seq, absl::Span<const std::vector<float>> grads, bool ok);

  // Step `seq`'s push is about to go out: waits for gated pulls in flight, then marks it
  // begun.
  void PushStarting(uint64_t seq);
  // Step `seq`'s push is over (applied or failed).
  void PushEnded(uint64_t seq);
  // Step `seq` will never push (its compute or an earlier part failed).
  void Skip(uint64_t seq);

  // Gradients seen so far (the local optimizer's step count).
  int64_t updates() const { return updates_; }

 private:
  explicit OwnGradient(std::unique_ptr<Optimizer> optimizer) : optimizer_(std::move(optimizer)) {}

  const std::unique_ptr<Optimizer> optimizer_;

  // Compute thread only.
  std::vector<std::vector<std::vector<float>>> slots_;  // [variable][slot]
  std::vector<std::vector<float>> delta_;               // [variable]: the last update
  uint64_t computes_ = 0;
  uint64_t delta_seq_ = 0;  // the compute `delta_` belongs to; 0: none
  int64_t updates_ = 0;

  absl::Mutex mu_;
  PushProgress progress_ ABSL_GUARDED_BY(mu_);
  int gated_pulls_ ABSL_GUARDED_BY(mu_) = 0;
  int pushes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_WORKER_OWN_GRADIENT_H_
