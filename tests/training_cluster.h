// TrainingCluster: the Cluster fixture (tests/cluster.h) with the loopback launcher: a whole
// local shardps cluster as real processes (chief, ps, workers and optionally an evaluator) on
// loopback addresses of their own, for process-level training tests and benchmarks. A test
// may play the supervisor: kill one daemon (any signal) and start it again at the same address
// with the same flags, as a new incarnation with its own log. Stopped (SIGTERM, then SIGKILL)
// by the destructor.
//
// Thread-safety: a TrainingCluster is used from one thread.
#ifndef SHARDPS_TESTS_TRAINING_CLUSTER_H_
#define SHARDPS_TESTS_TRAINING_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "tests/cluster.h"
#include "tests/loopback_launcher.h"
#include "tests/process.h"

namespace shardps {
namespace testing {

class TrainingCluster : public Cluster {
 public:
  using Options = LoopbackLauncher::Options;
  // Starts the daemons and returns once the chief answers (or has run its --job to the end
  // and exited 0).
  static absl::StatusOr<std::unique_ptr<TrainingCluster>> Start(const Options& options);

  const std::vector<std::string>& ps_addresses() const { return ps_addresses_; }
  const std::vector<std::string>& worker_addresses() const { return worker_addresses_; }
  // The evaluator's TF_CONFIG address; empty without one.
  std::string evaluator_address() const;
  // The current incarnation of each daemon (null: not started, or stopped and not started
  // again).
  Process* chief() { return loopback_->Current("chief", 0); }
  Process* ps(int i) { return loopback_->Current("ps", i); }
  Process* worker(int i) { return loopback_->Current("worker", i); }
  Process* evaluator() { return loopback_->Current("evaluator", 0); }
  const std::string& metrics_file() const { return loopback_->metrics_file(); }

  // A supervisor's moves. Stop* sends `sig` and waits (up to 60 s) for the process to exit:
  // its exit code (128 + signal when killed). Restart* / Start* start the daemon again at the
  // same address with the same flags (a new process, its own log file).
  absl::StatusOr<int> StopPs(int i, int sig) { return loopback_->Stop("ps", i, sig); }
  // Returns once the new ps accepts connections.
  absl::Status RestartPs(int i);
  absl::StatusOr<int> StopChief(int sig) { return loopback_->Stop("chief", 0, sig); }
  // Returns once the new chief answers GetStatus (or has exited 0 before it could: a chief
  // given a finished job reports it and ends).
  absl::Status RestartChief();
  // kill -9 the chief, start it again, and wait until its job shows in its status (the new
  // chief serves status at once and submits its --job once every ps answers): that status.
  absl::StatusOr<JobStatus> KillAndRestartChief();
  absl::Status StartWorker(int i) { return loopback_->Launch("worker", i); }
  absl::StatusOr<int> StopWorker(int i, int sig) { return loopback_->Stop("worker", i, sig); }
  // Sends `sig` to every daemon at once (a machine lost, say) and waits for all to exit.
  void SignalAll(int sig) { loopback_->SignalAll(sig); }

  // As Cluster's, with this fixture's default timeouts.
  absl::StatusOr<JobStatus> WaitForStatus(const std::function<bool(const JobStatus&)>& pred,
                                          absl::Duration timeout = absl::Minutes(2)) {
    return Cluster::WaitForStatus(pred, timeout);
  }
  using Cluster::Status;

  absl::StatusOr<std::unique_ptr<PsClient>> NewPsClient() const;
  // Every variable on the ps, whole, in VariableNames() order (tests compare runs with it); a
  // dynamic table, which has no whole, at `dynamic_keys` (its rows for those keys, in order).
  absl::StatusOr<std::vector<std::vector<float>>> PullAllVariables(
      const std::vector<int64_t>& dynamic_keys = {}) const;

 private:
  // Takes ownership of `launcher`.
  explicit TrainingCluster(LoopbackLauncher* launcher);

  LoopbackLauncher* const loopback_;  // owned by the Cluster
  const std::vector<std::string> ps_addresses_;
  const std::vector<std::string> worker_addresses_;
};

// Writes `json` to a fresh file in the test's temp dir and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& json);

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_TRAINING_CLUSTER_H_
