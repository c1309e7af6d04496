// The memory this process may use, for the ps' default --memory_budget_bytes: the smaller of
// the machine's memory (MemTotal in /proc/meminfo) and the limit of the process' cgroup when
// one is set (cgroup v2 memory.max; cgroup v1 memory.limit_in_bytes), since a container's
// limit, not the machine's size, is what the kernel enforces.
//
// Thread-safety: functions without shared state.
#ifndef SHARDPS_PS_SERVER_PROCESS_MEMORY_H_
#define SHARDPS_PS_SERVER_PROCESS_MEMORY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace shardps {

struct MemoryLimit {
  int64_t bytes = 0;
  std::string source;  // "MemTotal of /proc/meminfo", or the cgroup file that set it
};

// Reads the files under `root` ("" for the real /proc and /sys; a test passes a directory
// laid out the same way). FAILED_PRECONDITION when /proc/meminfo has no MemTotal.
absl::StatusOr<MemoryLimit> ProcessMemoryLimit(const std::string& root = "");

// MemTotal of a /proc/meminfo text, in bytes.
absl::StatusOr<int64_t> ParseMemTotal(absl::string_view meminfo);
// A cgroup limit file's value in bytes; nullopt for "max" (v2) or a v1 value so large that it
// means no limit, or anything unparsable.
std::optional<int64_t> ParseCgroupLimit(absl::string_view text);
// The limit files that apply to a process, from its /proc/self/cgroup text, relative to the
// root: "/sys/fs/cgroup/<path>/memory.max" (v2, "0::<path>") and
// "/sys/fs/cgroup/memory/<path>/memory.limit_in_bytes" (v1, "N:memory:<path>").
std::vector<std::string> CgroupLimitFiles(absl::string_view proc_self_cgroup);

}  // namespace shardps

#endif  // SHARDPS_PS_SERVER_PROCESS_MEMORY_H_
