// Test harness for process-level tests: starts the real daemons as child processes on free
// localhost ports, and always stops them (the destructor kills what is still running).
//
// Thread-safety: a Process is used from one thread.
#ifndef SHARDPS_TESTS_PROCESS_H_
#define SHARDPS_TESTS_PROCESS_H_

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace shardps {
namespace testing {

class Process {
 public:
  // Starts `binary` with `args`, the current environment plus `env`, stdout and stderr to
  // `log_path`.
  static absl::StatusOr<std::unique_ptr<Process>> Start(
      const std::string& binary, const std::vector<std::string>& args,
      const std::map<std::string, std::string>& env, const std::string& log_path);
  ~Process();

  pid_t pid() const { return pid_; }
  const std::string& log_path() const { return log_path_; }
  void Signal(int sig);
  // Waits for exit; returns the exit code (128 + signal when killed) or DEADLINE_EXCEEDED.
  absl::StatusOr<int> Wait(absl::Duration timeout);
  bool Running();
  // The exit code, once Running or Wait has seen the process end.
  std::optional<int> exit_code() const { return exit_code_; }
  std::string Log() const;
  // Whether the log holds `text`, polled until it does or `timeout` has passed.
  bool WaitForLog(absl::string_view text, absl::Duration timeout) const;

 private:
  Process(pid_t pid, std::string log_path) : pid_(pid), log_path_(std::move(log_path)) {}
  pid_t pid_;
  std::string log_path_;
  std::optional<int> exit_code_;
};

// Runs a command to completion; returns its exit code and fills `output` (stdout+stderr).
absl::StatusOr<int> RunCommand(const std::string& binary, const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& env,
                               std::string* output, absl::Duration timeout = absl::Seconds(60));

// A port that was free a moment ago on 127.0.0.1 (the kernel's choice for port 0); ports
// handed out by one process are never repeated.
int PickFreePort();

// "HOST:PORT" for one task of a test cluster, its own address on the loopback network that
// no other call in any test process returns at the same time, so that nothing races for it:
// each process takes a random /24 of 127.64.0.0/10 (127.A.B.1, .2, ...; the next /24 after
// 254 tasks) and one random port in 20000..29999 (below the kernel's ephemeral ports, which
// other tests' clients and PickFreePort take), checked bindable there (no listener on every
// interface holds it). Daemons listen on a loopback TF_CONFIG address itself (rpc ListenAddress).
std::string LoopbackAddress();

// The Python of the tests' virtualenv (deploy/python_env.sh, named by $SHARDPS_VENV, which
// deploy/test.sh passes), or "" with the reason in `why` (the caller skips, saying it).
std::string VenvPython(std::string* why);

// The path of a binary built by Bazel, e.g. "ps_server/ps", from the test's runfiles.
std::string BinaryPath(const std::string& target_path);

// A scratch directory for this test.
std::string TempDir();
// TempDir()/name, removed (with all it holds) if it exists; not created.
std::string FreshTempDir(const std::string& name);

// This process's executable (from /proc/self/exe).
std::string SelfPath();

// For binaries started by `bazel run` (benchmarks), which get no TEST_SRCDIR or TEST_TMPDIR:
// points BinaryPath at this binary's runfiles (the first candidate holding `probe`, e.g.
// "ps_server/ps") and TempDir at a fresh directory named after `tmp_prefix`.
void SetUpRunfilesForBazelRun(const char* argv0, const std::string& probe,
                              const std::string& tmp_prefix);

// A TF_CONFIG JSON for `cluster` with this task.
std::string MakeTfConfig(const std::map<std::string, std::vector<std::string>>& cluster,
                         const std::string& type, int index);

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_PROCESS_H_
