#include "common/protocol_version.h"

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/error_detail.h"

namespace shardps {
namespace {

// Both halves in one word, so that a reader never sees half of an update.
std::atomic<uint64_t> local_protocol{(uint64_t{kMinProtocolVersion} << 32) | kProtocolVersion};

bool ParseVersion(absl::string_view text, int* version) {
  return absl::SimpleAtoi(text, version) && *version >= 1 && text.size() <= 9 &&
         text.find_first_not_of("0123456789") == absl::string_view::npos;
}

}  // namespace

ProtocolRange LocalProtocol() {
  const uint64_t packed = local_protocol.load(std::memory_order_relaxed);
  return ProtocolRange{static_cast<int>(packed >> 32), static_cast<int>(packed & 0xffffffffu)};
}

void SetLocalProtocolForTesting(ProtocolRange range) {
  local_protocol.store((static_cast<uint64_t>(range.min) << 32) | static_cast<uint32_t>(range.current),
                       std::memory_order_relaxed);
}

std::string FormatProtocolHeader(ProtocolRange range) {
  return absl::StrCat(range.min, "-", range.current);
}

absl::StatusOr<ProtocolRange> ParseProtocolHeader(absl::string_view text) {
  auto bad = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad shardps protocol version \"",
                                                   absl::CEscape(text.substr(0, 64)), "\": ", why));
  };
  std::vector<absl::string_view> parts = absl::StrSplit(text, '-');
  ProtocolRange range;
  if (parts.size() == 1) {
    if (!ParseVersion(parts[0], &range.current)) return bad("expected MIN-CURRENT or CURRENT");
    range.min = range.current;
  } else if (parts.size() == 2) {
    if (!ParseVersion(parts[0], &range.min) || !ParseVersion(parts[1], &range.current)) {
      return bad("expected MIN-CURRENT, each an integer >= 1");
    }
    if (range.min > range.current) return bad("MIN is above CURRENT");
  } else {
    return bad("expected MIN-CURRENT or CURRENT");
  }
  return range;
}

std::string DescribeProtocol(ProtocolRange range) {
  if (range.min == range.current) return absl::StrCat("protocol ", range.current);
  return absl::StrCat("protocol ", range.current, " (compatible back to ", range.min, ")");
}

absl::Status CheckProtocolCompatible(ProtocolRange peer, ProtocolRange local,
                                     absl::string_view peer_role, absl::string_view local_role) {
  if (peer.min <= local.current && local.min <= peer.current) return absl::OkStatus();
  return WithDetail(
      absl::FailedPreconditionError(absl::StrCat(
          "incompatible shardps protocol: ", peer_role, " speaks ", DescribeProtocol(peer), ", ",
          local_role, " speaks ", DescribeProtocol(local),
          "; run releases whose protocols overlap (docs/deploying.md#rolling-upgrades)")),
      ErrorDetail::PROTOCOL_MISMATCH);
}

}  // namespace shardps
