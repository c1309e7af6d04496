#include "ps_server/process_memory.h"

#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace shardps {
namespace {

// cgroup v1 reports "no limit" as a page-rounded LONG_MAX; anything from 2^60 on is that.
constexpr int64_t kNoLimit = int64_t{1} << 60;

std::optional<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

absl::StatusOr<int64_t> ParseMemTotal(absl::string_view meminfo) {
  for (absl::string_view line : absl::StrSplit(meminfo, '\n')) {
    if (!absl::ConsumePrefix(&line, "MemTotal:")) continue;
    line = absl::StripAsciiWhitespace(line);
    int64_t kib = 0;
    if (absl::ConsumeSuffix(&line, "kB")) line = absl::StripAsciiWhitespace(line);
    if (!absl::SimpleAtoi(line, &kib) || kib <= 0) break;
    return kib * 1024;
  }
  return absl::FailedPreconditionError("/proc/meminfo has no MemTotal line in kB");
}

std::optional<int64_t> ParseCgroupLimit(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  int64_t bytes = 0;
  if (text == "max" || !absl::SimpleAtoi(text, &bytes) || bytes <= 0 || bytes >= kNoLimit) {
    return std::nullopt;
  }
  return bytes;
}

std::vector<std::string> CgroupLimitFiles(absl::string_view proc_self_cgroup) {
  std::vector<std::string> files;
  for (absl::string_view line : absl::StrSplit(proc_self_cgroup, '\n', absl::SkipEmpty())) {
    const std::vector<absl::string_view> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    std::string path(absl::StripSuffix(fields[2], "/"));
    if (fields[0] == "0" && fields[1].empty()) {
      files.push_back(absl::StrCat("/sys/fs/cgroup", path, "/memory.max"));
    } else {
      for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
        if (controller == "memory") {
          files.push_back(absl::StrCat("/sys/fs/cgroup/memory", path, "/memory.limit_in_bytes"));
        }
      }
    }
  }
  return files;
}

absl::StatusOr<MemoryLimit> ProcessMemoryLimit(const std::string& root) {
  const std::optional<std::string> meminfo = ReadFile(root + "/proc/meminfo");
  if (!meminfo.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot read ", root, "/proc/meminfo"));
  }
  absl::StatusOr<int64_t> total = ParseMemTotal(*meminfo);
  if (!total.ok()) return total.status();
  MemoryLimit limit{*total, "MemTotal of /proc/meminfo"};
  const std::optional<std::string> cgroup = ReadFile(root + "/proc/self/cgroup");
  if (!cgroup.has_value()) return limit;
  for (const std::string& file : CgroupLimitFiles(*cgroup)) {
    const std::optional<std::string> text = ReadFile(root + file);
    if (!text.has_value()) continue;
    const std::optional<int64_t> bytes = ParseCgroupLimit(*text);
    if (bytes.has_value() && *bytes < limit.bytes) limit = MemoryLimit{*bytes, file};
  }
  return limit;
}

}  // namespace shardps
