// Log: the one way a daemon writes to its log (stderr), one line per record (FormatLogLine).
//
//   LogInfo() << "serving on " << address;   // written when the statement ends
//   LogError() << status;
//
// A command-line error before a daemon exits 2 is no record: it stays a plain "error: ..."
// line (common/flags.h HandleParseResult, rpc/daemon.h ExitBadConfig).
//
// Thread-safety: any thread may log at any time; each record is written whole, in one write,
// so records of concurrent threads never interleave. SetLogDaemon is meant for main(), before
// threads log.
#ifndef SHARDPS_COMMON_LOG_H_
#define SHARDPS_COMMON_LOG_H_

#include <sstream>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace shardps {

enum class LogSeverity { kInfo, kWarning, kError };

// Names this process's daemon in every record from now on ("" to leave it out).
void SetLogDaemon(absl::string_view daemon);
std::string LogDaemon();

// The line a record becomes, without its newline:
//   2026-11-05T12:34:56.789Z chief: job fm-1 started, 4690 steps
//   2026-11-05T12:34:57.012Z chief: warning: ps 1 unreachable: ...
//   2026-11-05T12:34:58.345Z chief: error: ps:0 (...): incompatible shardps protocol ...
// The time is UTC with milliseconds; the daemon is left out until SetLogDaemon; the severity
// is named after the daemon (none for info), so a record's text can be matched as a substring
// of the log. Newlines in a message become spaces.
std::string FormatLogLine(absl::Time time, absl::string_view daemon, LogSeverity severity,
                          absl::string_view message);

// Writes one record, stamped now, to stderr.
void Log(LogSeverity severity, absl::string_view message);

// A record built with <<, written by the destructor (at the end of the full expression).
class LogMessage {
 public:
  explicit LogMessage(LogSeverity severity) : severity_(severity) {}
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage() { Log(severity_, stream_.str()); }

  template <typename T>
  LogMessage& operator<<(const T& value) {
    stream_ << value;
    return *this;
  }

 private:
  const LogSeverity severity_;
  std::ostringstream stream_;
};

inline LogMessage LogInfo() { return LogMessage(LogSeverity::kInfo); }
inline LogMessage LogWarning() { return LogMessage(LogSeverity::kWarning); }
inline LogMessage LogError() { return LogMessage(LogSeverity::kError); }

}  // namespace shardps

#endif  // SHARDPS_COMMON_LOG_H_
