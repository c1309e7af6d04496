#include "partitioners/placement.h"

#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace shardps {
namespace {

absl::Status ValidateNumPs(absl::string_view placer, int num_ps) {
  if (num_ps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(placer, ": num_ps must be >= 1, got ", num_ps));
  }
  return absl::OkStatus();
}

class RoundRobinPlacer : public Placer {
 public:
  explicit RoundRobinPlacer(int num_ps) : num_ps_(num_ps) {}

  int Place(int64_t /*shard_bytes*/) override {
    return static_cast<int>(count_++ % num_ps_);
  }

  std::string DebugString() const override {
    return absl::StrCat("RoundRobinPlacer(num_ps=", num_ps_, ", placed=", count_, ")");
  }

 private:
  const int num_ps_;
  uint64_t count_ = 0;  // Shards placed so far, across all variables.
};

class ByBytesPlacer : public Placer {
 public:
  explicit ByBytesPlacer(int num_ps) : bytes_(num_ps, 0) {}

  int Place(int64_t shard_bytes) override {
    int best = 0;
    for (int i = 1; i < static_cast<int>(bytes_.size()); ++i) {
      if (bytes_[i] < bytes_[best]) best = i;
    }
    const int64_t add = shard_bytes > 0 ? shard_bytes : 0;
    // Saturate rather than overflow: by then every ps is "full" and ties still resolve.
    if (__builtin_add_overflow(bytes_[best], add, &bytes_[best])) {
      bytes_[best] = std::numeric_limits<int64_t>::max();
    }
    return best;
  }

  std::string DebugString() const override {
    return absl::StrCat("ByBytesPlacer(num_ps=", bytes_.size(), ", bytes=[",
                        absl::StrJoin(bytes_, ","), "])");
  }

 private:
  std::vector<int64_t> bytes_;  // Bytes placed on each ps so far.
};

}  // namespace

absl::StatusOr<std::unique_ptr<Placer>> NewRoundRobinPlacer(int num_ps) {
  if (absl::Status status = ValidateNumPs("RoundRobinPlacer", num_ps); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Placer>(new RoundRobinPlacer(num_ps));
}

absl::StatusOr<std::unique_ptr<Placer>> NewByBytesPlacer(int num_ps) {
  if (absl::Status status = ValidateNumPs("ByBytesPlacer", num_ps); !status.ok()) {
    return status;
  }
  return std::unique_ptr<Placer>(new ByBytesPlacer(num_ps));
}

absl::StatusOr<std::unique_ptr<Placer>> ParsePlacement(absl::string_view spec, int num_ps) {
  if (spec == "round_robin") return NewRoundRobinPlacer(num_ps);
  if (spec == "by_bytes") return NewByBytesPlacer(num_ps);
  return absl::InvalidArgumentError(absl::StrCat("placement \"", absl::CHexEscape(spec),
                                                 "\" is unknown; expected round_robin or "
                                                 "by_bytes"));
}

}  // namespace shardps
