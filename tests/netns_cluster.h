// NetnsCluster: a whole shardps cluster with every task in its own network namespace, as
// deploy/run_netns.sh runs it (one namespace PREFIX-TYPE-INDEX per task, a veth pair each to
// the bridge PREFIX-br0 on a private /24), driven from a test: the job's status from the
// chief over the bridge, each daemon's pid and log, and a task's link cut and restored (its
// host-side veth end set down and up: a cable pulled at the switch; packets to and from the
// task are dropped, nothing is refused). Each cluster takes a random prefix and subnet of its
// own, so tests and runs may overlap. The destructor stops the launcher (its trap removes the
// network) and then runs `run_netns.sh --cleanup` for the prefix, so a failed test leaves
// nothing behind either.
//
// Thread-safety: a NetnsCluster is used from one thread; the free functions are thread-safe.
#ifndef SHARDPS_TESTS_NETNS_CLUSTER_H_
#define SHARDPS_TESTS_NETNS_CLUSTER_H_

#include <sys/types.h>

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/coordinator.grpc.pb.h"
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

class NetnsCluster {
 public:
  struct Options {
    std::string job_json;  // the job file's text
    int num_ps = 2;
    int num_workers = 2;
    // The first characters of the prefix (a-z, at most 4); a random suffix follows.
    std::string name = "nc";
  };
  // Starts run_netns.sh with the job and returns once the chief answers over the bridge. A
  // prefix or subnet that a concurrent run holds is replaced by another, up to 5 times.
  static absl::StatusOr<std::unique_ptr<NetnsCluster>> Start(const Options& options);
  ~NetnsCluster();

  const std::string& prefix() const { return prefix_; }
  const std::string& subnet() const { return subnet_; }
  const std::string& run_dir() const { return run_dir_; }
  // Where run_netns.sh has the chief write checkpoints (the job file may name its own).
  std::string checkpoint_dir() const { return run_dir_ + "/checkpoints"; }
  Process* launcher() { return launcher_.get(); }

  // Tasks are named "chief-0", "ps-1", "worker-0", "evaluator-0".
  // The task's host-side veth end, PREFIX-vN (N: the last number of its address).
  std::string Veth(const std::string& task) const;
  // Sets the task's link down (cut) or up (restored).
  absl::Status SetLink(const std::string& task, bool up);
  // The daemon's pid now (the launcher restarts a daemon that dies); 0 when unknown.
  pid_t Pid(const std::string& task) const;
  // The daemon's log (every incarnation's), and every task's log and the launcher's, labelled.
  std::string Log(const std::string& task) const;
  std::string Logs() const;

  // The chief's status over the bridge.
  absl::StatusOr<JobStatus> Status(absl::Duration timeout = absl::Seconds(2));
  // Polls the status until `pred` holds for it (a failed call counts as "not yet": the chief
  // may be cut off) and returns it; DEADLINE_EXCEEDED with the last status and the logs.
  absl::StatusOr<JobStatus> WaitForStatus(const std::function<bool(const JobStatus&)>& pred,
                                          absl::Duration timeout = absl::Minutes(1));
  // Polls until the job SUCCEEDED and returns that status; fails at once when it ended in
  // another state, or when the launcher exited before the success was seen. The default bound
  // is for a loaded machine (a 10000-step job still training after a minute at load 8 on 2
  // cores); a job that stops progressing fails sooner in the caller's own checks.
  absl::StatusOr<JobStatus> WaitForSuccess(absl::Duration timeout = absl::Minutes(4));
  // Waits for the launcher to exit (the chief ends it after the job) and returns its exit
  // code; the namespaces are gone once it has.
  absl::StatusOr<int> WaitForLauncher(absl::Duration timeout = absl::Seconds(60));
  // Stops the launcher if it runs, removes whatever the prefix left, and returns
  // NetnsLeftovers afterwards, and every daemon process seen that still runs ("" when nothing
  // is left). The destructor does the same.
  std::string Shutdown();

 private:
  NetnsCluster() = default;
  std::vector<std::string> Tasks() const;

  Options options_;
  std::string prefix_;
  std::string subnet_;
  std::string run_dir_;
  bool shut_down_ = false;
  std::unique_ptr<Process> launcher_;
  std::unique_ptr<CoordinatorService::Stub> stub_;
  mutable std::set<pid_t> seen_pids_;  // every daemon pid Pid has returned
};

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_NETNS_CLUSTER_H_
