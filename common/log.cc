#include "common/log.h"

#include <unistd.h>

#include <cerrno>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace shardps {
namespace {

struct LogState {
  absl::Mutex mu;  // also held while a record is written, so that records never interleave
  std::string daemon ABSL_GUARDED_BY(mu);
};

LogState& State() {
  static LogState* state = new LogState;  // never destroyed: threads may log during exit
  return *state;
}

const char* SeverityPrefix(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return "";
    case LogSeverity::kWarning:
      return "warning: ";
    case LogSeverity::kError:
      return "error: ";
  }
  return "";
}

// The whole of `data` to fd 2, retrying short and interrupted writes.
void WriteAll(absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to report that the log is gone
    data.remove_prefix(static_cast<size_t>(n));
  }
}

}  // namespace

void SetLogDaemon(absl::string_view daemon) {
  LogState& state = State();
  absl::MutexLock lock(&state.mu);
  state.daemon = std::string(daemon);
}

std::string LogDaemon() {
  LogState& state = State();
  absl::MutexLock lock(&state.mu);
  return state.daemon;
}

std::string FormatLogLine(absl::Time time, absl::string_view daemon, LogSeverity severity,
                          absl::string_view message) {
  std::string line = absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ ", time, absl::UTCTimeZone());
  if (!daemon.empty()) absl::StrAppend(&line, daemon, ": ");
  absl::StrAppend(&line, SeverityPrefix(severity));
  const size_t start = line.size();
  absl::StrAppend(&line, message);
  for (size_t i = start; i < line.size(); ++i) {
    if (line[i] == '\n' || line[i] == '\r') line[i] = ' ';
  }
  return line;
}

void Log(LogSeverity severity, absl::string_view message) {
  LogState& state = State();
  absl::MutexLock lock(&state.mu);
  std::string line = FormatLogLine(absl::Now(), state.daemon, severity, message);
  line.push_back('\n');
  WriteAll(line);
}

}  // namespace shardps
