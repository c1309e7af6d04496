// VersionsSeen: the versions a pull's parts saw (PullVersions), gathered as the parts
// complete, on any thread: the lowest and highest, and each shard's lowest.
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_CLIENT_VERSIONS_SEEN_H_
#define SHARDPS_CLIENT_VERSIONS_SEEN_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client_types.h"

namespace shardps {

class VersionsSeen {
 public:
  // A part of the pull read `shard` at `version`.
  void Add(const std::string& shard, int64_t version);
  // Moves what was seen to *out. REQUIRES: every part has completed.
  void Fill(PullVersions* out);

 private:
  absl::Mutex mu_;
  int64_t min_ ABSL_GUARDED_BY(mu_) = INT64_MAX;
  int64_t max_ ABSL_GUARDED_BY(mu_) = INT64_MIN;
  std::map<std::string, int64_t> shards_ ABSL_GUARDED_BY(mu_);
};

}  // namespace shardps

#endif  // SHARDPS_CLIENT_VERSIONS_SEEN_H_
