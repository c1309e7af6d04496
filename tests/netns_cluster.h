// NetnsCluster: the Cluster fixture (tests/cluster.h) with the network-namespace launcher
// (tests/netns_launcher.h): a whole shardps cluster as deploy/run_netns.sh runs it, driven
// from a test: the job's status from the chief over the bridge, each daemon's pid and log,
// and a task's link cut and restored. Each cluster takes a random prefix and subnet of its
// own, so tests and runs may overlap; the destructor leaves nothing behind.
//
// Thread-safety: a NetnsCluster is used from one thread.
#ifndef SHARDPS_TESTS_NETNS_CLUSTER_H_
#define SHARDPS_TESTS_NETNS_CLUSTER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/cluster.h"
#include "tests/netns_launcher.h"
#include "tests/process.h"

namespace shardps {
namespace testing {

class NetnsCluster : public Cluster {
 public:
  using Options = NetnsLauncher::Options;
  // Starts run_netns.sh with the job and returns once the chief answers over the bridge. A
  // prefix or subnet that a concurrent run holds is replaced by another, up to 5 times.
  static absl::StatusOr<std::unique_ptr<NetnsCluster>> Start(const Options& options);

  const std::string& prefix() const { return netns_->prefix(); }
  const std::string& subnet() const { return netns_->subnet(); }
  const std::string& run_dir() const { return netns_->run_dir(); }
  // Where run_netns.sh has the chief write checkpoints (the job file may name its own).
  std::string checkpoint_dir() const { return run_dir() + "/checkpoints"; }
  // The run_netns.sh process.
  Process* launcher() { return netns_->script(); }

  // Tasks are named "chief-0", "ps-1", "worker-0", "evaluator-0".
  std::string Veth(const std::string& task) const { return netns_->Veth(task); }
  absl::Status SetLink(const std::string& task, bool up) { return netns_->SetLink(task, up); }

  // The chief's status over the bridge; short calls by default (the chief may be cut off).
  using Cluster::Status;
  // As Cluster's, with this fixture's default timeout.
  absl::StatusOr<JobStatus> WaitForStatus(const std::function<bool(const JobStatus&)>& pred,
                                          absl::Duration timeout = absl::Minutes(1)) {
    return Cluster::WaitForStatus(pred, timeout);
  }
  // Polls until the job SUCCEEDED and returns that status; fails at once when it ended in
  // another state, or when the launcher exited before the success was seen. The default bound
  // is for a loaded machine (a 10000-step job still training after a minute at load 8 on 2
  // cores); a job that stops progressing fails sooner in the caller's own checks.
  absl::StatusOr<JobStatus> WaitForSuccess(absl::Duration timeout = absl::Minutes(4)) {
    return WaitForState(JobStatus::SUCCEEDED, timeout);
  }
  // Waits for the launcher to exit (the chief ends it after the job) and returns its exit
  // code; the namespaces are gone once it has.
  absl::StatusOr<int> WaitForLauncher(absl::Duration timeout = absl::Seconds(60)) {
    return netns_->script()->Wait(timeout);
  }
  // Stops the launcher if it runs, removes whatever the prefix left, and returns
  // NetnsLeftovers afterwards, and every daemon process seen that still runs ("" when nothing
  // is left). The destructor does the same.
  std::string Shutdown() { return netns_->Shutdown(); }

 private:
  // Takes ownership of `launcher`.
  explicit NetnsCluster(NetnsLauncher* launcher);

  NetnsLauncher* const netns_;  // owned by the Cluster
};

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_NETNS_CLUSTER_H_
