// Launcher: how a Cluster (tests/cluster.h) starts and stops its daemons, a strategy: as child
// processes on loopback addresses (tests/loopback_launcher.h) or each in a network namespace
// of its own, by deploy/run_netns.sh (tests/netns_launcher.h). Tasks are named by TF_CONFIG
// type and index: "chief-0", "ps-1", "worker-0", "evaluator-0".
//
// Thread-safety: a Launcher is used from one thread.
#ifndef SHARDPS_TESTS_LAUNCHER_H_
#define SHARDPS_TESTS_LAUNCHER_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace shardps {
namespace testing {

class Launcher {
 public:
  virtual ~Launcher() = default;

  // The chief's "IP:PORT" as this process dials it.
  virtual std::string chief_address() const = 0;
  // Empty while the chief runs or may yet come (its supervisor restarts it). Once it cannot
  // answer any more (it, or whatever runs it, has exited): OK when it ended well (a chief that
  // ran its job to the end and exited 0), else the error, with what the logs say.
  virtual std::optional<absl::Status> ChiefEnded() = 0;
  // The task's daemon's pid now; 0 when unknown (not started, or not running).
  virtual pid_t Pid(const std::string& task) const = 0;
  // The task's log (every incarnation's).
  virtual std::string Log(const std::string& task) const = 0;
  // Every task's log, labelled, and the launcher's own.
  virtual std::string Logs() const = 0;
};

// "ps-1" for ("ps", 1).
inline std::string TaskName(const std::string& type, int index) {
  return absl::StrCat(type, "-", index);
}

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_LAUNCHER_H_
