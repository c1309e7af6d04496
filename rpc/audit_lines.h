// AuditLines: the audit log's lines for a stream of audited calls (rpc/call_gate.h), with
// runs of the same call by the same caller from the same host (any of its connections) folded
// as syslog folds a repeated message: the first call of a run is written whole, the repeats
// within `window` of it are counted, and the count is written ("the audited call above was
// made N more times until ...") before the next line that differs or the first repeat after
// the window, which starts a new run. A bucket move of thousands of runs makes thousands of
// MoveBuckets calls on each ps; the log gets a line or two for them instead of one each. No
// call goes unrecorded: each run's first call is a whole line and its repeats are counted, the
// last run's count being written with the next audited call (a process that ends first leaves
// its last count unwritten).
//
// Thread-safety: thread-safe.
#ifndef SHARDPS_RPC_AUDIT_LINES_H_
#define SHARDPS_RPC_AUDIT_LINES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace shardps {

// A gRPC peer ("ipv4:10.0.0.1:5000", "ipv6:[::1]:5000") without its port: the host.
absl::string_view PeerHost(absl::string_view peer);

class AuditLines {
 public:
  explicit AuditLines(absl::Duration window = absl::Seconds(10)) : window_(window) {}

  // The lines to write for an audited call described by `line`, whose `key` is the same for
  // the same call, caller and host, at `now`: none for a repeat within the window.
  std::vector<std::string> Add(const std::string& key, const std::string& line, absl::Time now);

 private:
  const absl::Duration window_;
  absl::Mutex mu_;
  std::string last_key_ ABSL_GUARDED_BY(mu_);
  absl::Time run_start_ ABSL_GUARDED_BY(mu_);
  absl::Time last_repeat_ ABSL_GUARDED_BY(mu_);
  int64_t repeats_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace shardps

#endif  // SHARDPS_RPC_AUDIT_LINES_H_
