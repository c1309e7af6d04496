#include "rpc/audit_lines.h"

#include "absl/strings/str_cat.h"

namespace shardps {

absl::string_view PeerHost(absl::string_view peer) {
  const size_t colon = peer.rfind(':');
  if (colon == absl::string_view::npos || colon + 1 == peer.size()) return peer;
  for (char c : peer.substr(colon + 1)) {
    if (c < '0' || c > '9') return peer;
  }
  return peer.substr(0, colon);
}

std::vector<std::string> AuditLines::Add(const std::string& key, const std::string& line,
                                         absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (key == last_key_ && now - run_start_ < window_) {
    ++repeats_;
    last_repeat_ = now;
    return {};
  }
  std::vector<std::string> out;
  if (repeats_ > 0) {
    out.push_back(absl::StrCat("the audited call above was made ", repeats_, " more time",
                               repeats_ == 1 ? "" : "s", " until ",
                               absl::FormatTime("%H:%M:%E3S", last_repeat_, absl::UTCTimeZone()),
                               " UTC"));
  }
  out.push_back(line);
  last_key_ = key;
  run_start_ = now;
  repeats_ = 0;
  return out;
}

}  // namespace shardps
