// Staleness-aware ASYNC updates (UpdateSpec.staleness_lr, .delay_compensation): the parts a
// shard (ps_server/shard.h) uses to apply a push whose gradient was computed on parameters
// older than the shard's current ones.
//
// A push names its base version (PushRequest.base_version; 0: unknown, no policy). Its
// staleness is the number of updates after the base version that touched any of its rows
// (UpdateHistory), not the version difference: a large shard's push split into row chunks is
// one update per chunk, and a chunk is not made stale by the chunks of its own step.
//  - staleness_lr INVERSE (Zhang et al. 2016, "Staleness-aware Async-SGD"): the update's
//    learning rate (after decay; Adam's lr_t) is divided by max(1, staleness).
//  - delay_compensation lambda (Zheng et al. 2017, DC-ASGD): the optimizer applies
//    g + lambda * g * g * (w_now - w_bak) elementwise, w_bak the parameters at the base
//    version (RetainedVersions; the oldest kept when the base is older), to dense pushes and,
//    row by row, to row pushes. Adaptive (DC-ASGD-a): see DelayCompensate.
// When both are on, the compensated gradient is applied with the scaled learning rate.
//
// Thread-safety: UpdateHistory and RetainedVersions are not thread-safe (a shard's own,
// guarded by its mutex); the free functions are pure.
#ifndef SHARDPS_PS_SERVER_STALENESS_H_
#define SHARDPS_PS_SERVER_STALENESS_H_

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/ps.pb.h"
#include "ps_server/param_blocks.h"

namespace shardps {

// The policy of one shard, from its UpdateSpec.
struct StalenessPolicy {
  static constexpr int kDefaultRetainedVersions = 8;
  static constexpr int kMaxRetainedVersions = 1024;
  static constexpr float kMeanSquareDecay = 0.95f;  // DC-ASGD-a's m
  static constexpr float kMeanSquareEpsilon = 1e-7f;

  UpdateSpec::StalenessLr lr = UpdateSpec::NONE;
  float lambda = 0;  // delay compensation; 0: off
  bool adaptive = false;
  int retained_versions = 0;  // with delay compensation: K (the default resolved)

  // REQUIRES: ValidateStalenessSpec(spec) passed.
  static StalenessPolicy FromSpec(const UpdateSpec& spec);
  bool enabled() const { return lr != UpdateSpec::NONE || compensates(); }
  bool compensates() const { return lambda > 0; }
  // The learning-rate multiplier for a push of this staleness.
  double LrScale(int64_t staleness) const;
};

// The staleness fields of an UpdateSpec: staleness_lr known; delay_compensation >= 0 and
// finite in float32; delay_compensation_adaptive and retained_versions (0..1024) only with
// delay_compensation; none of them on a SYNC shard. INVALID_ARGUMENT naming the field
// ("update.delay_compensation must be ...").
absl::Status ValidateStalenessSpec(const UpdateSpec& spec);

// The row ranges of a shard's recent updates, to count a push's staleness.
class UpdateHistory {
 public:
  static constexpr int kCapacity = 1024;

  // Keeps nothing until Enable.
  UpdateHistory() = default;
  // Allocates room for kCapacity updates. Throws std::bad_alloc.
  void Enable();
  bool enabled() const { return !ring_.empty(); }

  // The update that made `version` touched rows [begin, end) (a row push: the hull of its
  // ids). Never allocates; forgets the oldest update past kCapacity.
  void Record(int64_t version, int64_t begin, int64_t end);
  // Updates after version `base` up to `current` that touched any row of [begin, end); an
  // update older than those recorded counts as touching them (so the answer is at most
  // current - base, and equals it without a history).
  int64_t Staleness(int64_t base, int64_t current, int64_t begin, int64_t end) const;
  // Forgets every update (the shard's parameters were replaced or assigned).
  void Clear();

 private:
  struct Entry {
    int64_t version;
    int64_t begin;
    int64_t end;
  };
  std::vector<Entry> ring_;
  size_t next_ = 0;   // where the next entry goes
  size_t count_ = 0;  // entries held
};

// Views of a shard's parameters at its last few versions (delay compensation's w_bak). They
// share the copy-on-write blocks, so an update copies a block only while an older version
// still holds it: up to K more copies of a dense shard that every update rewrites, and for a
// large table updated at a few rows per push a whole block (up to 1 MiB) per block touched.
class RetainedVersions {
 public:
  explicit RetainedVersions(int capacity) : capacity_(capacity) {}

  // Keeps a view of `params`, the parameters at `version`, sharing its blocks (the next
  // update then copies the blocks it changes); the oldest goes past capacity. Keeping a
  // version already kept last replaces it; one that does not follow the last kept starts
  // afresh (the versions kept are always consecutive). Throws std::bad_alloc.
  void Retain(int64_t version, const ParamBlocks& params);
  // The parameters at `version`, or, when `version` is older than every version kept, the
  // oldest kept (*exact = false); null when neither (nothing kept, or `version` newer).
  const ParamBlocks* Find(int64_t version, bool* exact) const;
  // The bytes of the blocks the kept versions hold that `current` does not (each counted
  // once): what delay compensation costs in memory now.
  int64_t ExtraBytes(const ParamBlocks& current) const;
  int size() const { return static_cast<int>(versions_.size()); }
  void Clear() { versions_.clear(); }

 private:
  const int capacity_;
  std::deque<std::pair<int64_t, ParamBlocks>> versions_;  // oldest first, consecutive
};

// One run of the delay-compensated gradient: out[i] = g[i] + l * g[i] * g[i] * (now[i] -
// bak[i]), l = policy.lambda, or with `mean_square` (DC-ASGD-a; null when not adaptive)
// first mean_square[i] = 0.95 * mean_square[i] + 0.05 * g[i] * g[i], then l = lambda /
// (sqrt(mean_square[i]) + 1e-7). A null `bak` compensates nothing (out = g) but still
// updates mean_square; `out` may then be null too (only mean_square is wanted). Float32
// arithmetic, in this order.
void DelayCompensate(const StalenessPolicy& policy, int64_t n, const float* g, const float* now,
                     const float* bak, float* mean_square, float* out);

// What the policies did to a shard's pushes (for tests and diagnostics).
struct StalenessStats {
  int64_t pushes_with_base = 0;  // pushes that named a base version
  int64_t total_staleness = 0;   // the sum of their staleness
  int64_t max_staleness = 0;
  int64_t compensated = 0;            // delay-compensated against their base version
  int64_t compensated_partially = 0;  // against the oldest version kept (the base was older)
  int64_t uncompensated = 0;          // stale, but no version of theirs or after was kept
};

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_STALENESS_H_
