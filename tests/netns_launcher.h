// NetnsLauncher: a Launcher that runs a whole shardps cluster with every task in its own
// network namespace, as deploy/run_netns.sh runs it (one namespace PREFIX-TYPE-INDEX per task,
// a veth pair each to the bridge PREFIX-br0 on a private /24, a supervisor per daemon that
// restarts it). A task's link can be cut and restored (its host-side veth end set down and
// up: a cable pulled at the switch; packets to and from the task are dropped, nothing is
// refused). The destructor stops the script (its trap removes the network) and then runs
// `run_netns.sh --cleanup` for the prefix, so a failed test leaves nothing behind either.
//
// Thread-safety: a NetnsLauncher is used from one thread; the free functions are thread-safe.
#ifndef SHARDPS_TESTS_NETNS_LAUNCHER_H_
#define SHARDPS_TESTS_NETNS_LAUNCHER_H_

#include <sys/types.h>

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/launcher.h"
#include "tests/process.h"

namespace shardps {
namespace testing {

// Runs `/usr/sbin/ip ARGS`; returns its exit code (-1: could not run) and fills `out`.
int Ip(const std::vector<std::string>& args, std::string* out);

// Why network namespaces cannot be made here, or "" when they can (tried with a namespace
// named PREFIX-probe, removed again; give each test process its own PREFIX): not root, no
// iproute2, `ip netns add` refused.
std::string WhyNoNamespaces(const std::string& prefix);

// The lines of `ip netns list`, `ip -o link show` and the /etc/netns entries that name
// PREFIX-, and the processes still in a namespace of the prefix; "" when nothing is left.
std::string NetnsLeftovers(const std::string& prefix);

// A daemon's CPU time so far (user + system, from /proc/PID/stat); -1 s when it cannot be
// read (the process is gone).
absl::Duration ProcessCpuTime(pid_t pid);

class NetnsLauncher final : public Launcher {
 public:
  struct Options {
    std::string job_json;  // the job file's text
    int num_ps = 2;
    int num_workers = 2;
    // The first characters of the prefix (a-z, at most 4); a random suffix follows.
    std::string name = "nc";
  };
  // Starts run_netns.sh with the job, at a random prefix and subnet of its own (so tests and
  // runs may overlap), and returns once the chief's namespace is on the bridge (its
  // supervisor has started it: a connection tried before would leave by the default route and
  // wait out a long connect timeout), or the script has exited, or `deadline` has passed.
  static absl::StatusOr<std::unique_ptr<NetnsLauncher>> Start(const Options& options,
                                                              absl::Time deadline);
  ~NetnsLauncher() override { Shutdown(); }

  std::string chief_address() const override { return subnet_ + ".2:2222"; }
  // The script's exit ends the chief (the chief ends the script after the job).
  std::optional<absl::Status> ChiefEnded() override;
  // The daemon's pid now (the supervisor restarts a daemon that dies); 0 when unknown.
  pid_t Pid(const std::string& task) const override;
  std::string Log(const std::string& task) const override;
  std::string Logs() const override;

  // Whether the script refused to start because a concurrent run holds the prefix or the
  // subnet (exit 2, before it made anything): another pair may be tried.
  bool Collided();

  const std::string& prefix() const { return prefix_; }
  const std::string& subnet() const { return subnet_; }
  const std::string& run_dir() const { return run_dir_; }
  Process* script() { return script_.get(); }
  // The task's host-side veth end, PREFIX-vN (N: the last number of its address).
  std::string Veth(const std::string& task) const;
  // Sets the task's link down (cut) or up (restored).
  absl::Status SetLink(const std::string& task, bool up);
  // Stops the script if it runs, removes whatever the prefix left, and returns
  // NetnsLeftovers afterwards, and every daemon process seen that still runs ("" when nothing
  // is left).
  std::string Shutdown();

 private:
  NetnsLauncher() = default;
  std::vector<std::string> Tasks() const;

  Options options_;
  std::string prefix_;
  std::string subnet_;
  std::string run_dir_;
  bool shut_down_ = false;
  std::unique_ptr<Process> script_;
  mutable std::set<pid_t> seen_pids_;  // every daemon pid Pid has returned
};

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_NETNS_LAUNCHER_H_
