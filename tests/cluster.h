// Cluster: the one fixture of process-level tests and benchmarks (as Envoy's one
// BaseIntegrationTest): a shardps cluster of real daemons started by a Launcher strategy
// (tests/launcher.h), a client of its chief (client/chief_interface.h), and the waits on the
// chief's job, polled by ChiefInterface::WaitFor. TrainingCluster (loopback processes) and
// NetnsCluster (network namespaces) are a Cluster with their launcher's moves added;
// PsCluster (tests/ps_cluster.h) is the ps alone on the same loopback launcher, for tests of
// the ps without a chief. The other waits (a port, a log line, a process exit) are
// tests/wait.h's.
//
// Thread-safety: a Cluster is used from one thread; chief_client() is thread-safe.
#ifndef SHARDPS_TESTS_CLUSTER_H_
#define SHARDPS_TESTS_CLUSTER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/chief_interface.h"
#include "proto/coordinator.pb.h"
#include "tests/launcher.h"

namespace shardps {
namespace testing {

class Cluster {
 public:
  // How the waits poll the chief.
  struct Polling {
    absl::Duration status_interval = absl::Milliseconds(10);  // WaitForStatus
    absl::Duration state_interval = absl::Milliseconds(100);  // WaitForState
    absl::Duration call_timeout = absl::Seconds(5);           // each GetStatus of a wait
    absl::Duration status_timeout = absl::Seconds(5);         // Status()
  };

  virtual ~Cluster();
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  const std::string& chief_address() const { return chief_address_; }
  // A client of the chief. ConnectChief replaces it (a chief started again gets a fresh
  // channel): do not keep it across a restart of the chief.
  ChiefInterface& chief_client() { return *chief_; }

  // The chief's status; the call fails after `timeout` (default: Polling::status_timeout).
  absl::StatusOr<JobStatus> Status();
  absl::StatusOr<JobStatus> Status(absl::Duration timeout);
  // Polls the chief's status until `pred` holds for it and returns that status (a call that
  // fails counts as "not yet": the chief may be restarting or cut off). DEADLINE_EXCEEDED,
  // with the last status and the logs, after `timeout`.
  absl::StatusOr<JobStatus> WaitForStatus(const std::function<bool(const JobStatus&)>& pred,
                                          absl::Duration timeout);
  // Polls until the job's state is `state`; fails at once (with the logs) when the job ended
  // in another state, or when the chief can no longer answer (Launcher::ChiefEnded).
  absl::StatusOr<JobStatus> WaitForState(JobStatus::State state, absl::Duration timeout);
  // As WaitForStatus, polling as `options` say (interval, call timeout, a check of each
  // answer); the logs are added to a failure.
  absl::StatusOr<JobStatus> WaitFor(const std::function<bool(const JobStatus&)>& pred,
                                    absl::Duration timeout,
                                    const ChiefInterface::WaitOptions& options);
  // The options WaitForStatus polls with.
  ChiefInterface::WaitOptions status_wait_options() const;

  // The task's daemon's pid now ("chief-0", "ps-1", ...); 0 when unknown.
  pid_t Pid(const std::string& task) const { return launcher_->Pid(task); }
  std::string Log(const std::string& task) const { return launcher_->Log(task); }
  // Every daemon's log, labelled.
  std::string Logs() const { return launcher_->Logs(); }

 protected:
  Cluster(std::unique_ptr<Launcher> launcher, Polling polling);

  // Waits until the chief's port accepts connections (a channel whose first connection is
  // refused backs off for seconds), makes the chief client, and waits until the chief answers
  // a status, or has ended well (a chief given a short job may finish it and exit 0 before
  // it is asked). Fails at `deadline`, or once the chief has ended otherwise, with the logs.
  absl::Status ConnectChief(absl::Time deadline);

  Launcher& launcher() const { return *launcher_; }

 private:
  const std::unique_ptr<Launcher> launcher_;
  const Polling polling_;
  const std::string chief_address_;
  std::unique_ptr<ChiefInterface> chief_;
};

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_CLUSTER_H_
