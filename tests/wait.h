// The waits of process-level tests and benchmarks, written once: poll a condition until it
// holds or a deadline passes, and the conditions they wait on besides a job's status (which
// ChiefInterface::WaitFor polls): a TCP port that accepts connections, a log that holds a
// text. A process' exit is Process::Wait, built on PollUntil.
//
// Thread-safety: the functions are thread-safe; `done` and `keep_waiting` run on the caller's
// thread.
#ifndef SHARDPS_TESTS_WAIT_H_
#define SHARDPS_TESTS_WAIT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace shardps {
namespace testing {

// Calls `done` every `interval` until it returns true (true) or `deadline` has passed (false).
// `done` is called at least once, and once more at the deadline.
bool PollUntil(const std::function<bool()>& done, absl::Time deadline,
               absl::Duration interval = absl::Milliseconds(10));

// Whether a TCP connection to `address` ("IPv4:PORT") succeeds now.
bool AcceptsConnections(const std::string& address);

// Polls (every 20 ms) until `address` accepts connections. Gives up with UNAVAILABLE as soon
// as `keep_waiting` (when given) returns false (the process that was to listen has exited),
// and with DEADLINE_EXCEEDED at `deadline`; both name the address.
absl::Status WaitForPort(const std::string& address, absl::Time deadline,
                         const std::function<bool()>& keep_waiting = nullptr);

// Polls (every 10 ms) until the file at `path` holds `text`; whether it did by `deadline`.
bool WaitForFileText(const std::string& path, absl::string_view text, absl::Time deadline);

// The file's contents ("" when it cannot be read).
std::string ReadWholeFile(const std::string& path);

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_WAIT_H_
