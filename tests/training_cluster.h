// TrainingCluster: a whole local shardps cluster as real processes — chief, ps, workers and
// optionally an evaluator — on free localhost ports, for process-level training tests.
// A test may play the supervisor: kill one daemon (any signal) and start it again at the same
// address with the same flags, as a new incarnation with its own log. Stopped (SIGTERM, then
// SIGKILL) by the destructor.
//
// Thread-safety: a TrainingCluster is used from one thread.
#ifndef SHARDPS_TESTS_TRAINING_CLUSTER_H_
#define SHARDPS_TESTS_TRAINING_CLUSTER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "proto/coordinator.grpc.pb.h"
#include "tests/process.h"

namespace shardps {
namespace testing {

class TrainingCluster {
 public:
  struct Options {
    int num_ps = 2;
    int num_workers = 2;
    bool evaluator = false;
    // The evaluator runs outside TF_CONFIG's cluster (as Kubeflow's TFJob starts it): only its
    // own TF_CONFIG names its task; the other daemons' clusters have no evaluator.
    bool evaluator_outside_cluster = false;
    bool long_lived = false;  // chief keeps ps and workers up after the job
    std::string job_file;     // chief --job; empty: submit later
    // chief --checkpoint_dir (for jobs whose job file names no checkpoint dir); empty: none.
    std::string checkpoint_dir;
    // Extra flags for every daemon of a role (after the harness's own).
    std::vector<std::string> chief_flags;
    std::vector<std::string> ps_flags;
    std::vector<std::string> worker_flags;
    std::vector<std::string> evaluator_flags;
    // Extra flags for one task, after its role's: {"worker", 1} -> flags.
    std::map<std::pair<std::string, int>, std::vector<std::string>> task_flags;
    // false: the workers are in TF_CONFIG but not started (StartWorker starts them); the
    // chief then runs the job without a worker, and no step is done.
    bool start_workers = true;
  };
  static absl::StatusOr<std::unique_ptr<TrainingCluster>> Start(const Options& options);
  ~TrainingCluster();

  const std::string& chief_address() const { return chief_address_; }
  const std::vector<std::string>& ps_addresses() const { return ps_addresses_; }
  const std::vector<std::string>& worker_addresses() const { return spec_.at("worker"); }
  // The evaluator's TF_CONFIG address; empty without one.
  std::string evaluator_address() const {
    auto it = spec_.find("evaluator");
    return it == spec_.end() ? "" : it->second.at(0);
  }
  // The current incarnation of each daemon (null: not started, or stopped and not started
  // again).
  Process* chief() { return chief_->current.get(); }
  Process* ps(int i) { return ps_[i]->current.get(); }
  Process* worker(int i) { return workers_[i]->current.get(); }
  Process* evaluator() { return evaluator_ ? evaluator_->current.get() : nullptr; }
  const std::string& metrics_file() const { return metrics_file_; }

  // A supervisor's moves. Stop* sends `sig` and waits (up to 60 s) for the process to exit:
  // its exit code (128 + signal when killed). Restart* / Start* start the daemon again at the
  // same address with the same flags (a new process, its own log file).
  absl::StatusOr<int> StopPs(int i, int sig);
  // Returns once the new ps accepts connections.
  absl::Status RestartPs(int i);
  absl::StatusOr<int> StopChief(int sig);
  // Returns once the new chief answers GetStatus (or has exited 0 before it could: a chief
  // given a finished job reports it and ends).
  absl::Status RestartChief();
  // kill -9 the chief, start it again, and wait until its job shows in its status (the new
  // chief serves status at once and submits its --job once every ps answers): that status.
  absl::StatusOr<JobStatus> KillAndRestartChief();
  absl::Status StartWorker(int i);
  // Sends `sig` to every daemon at once (a machine lost, say) and waits for all to exit.
  void SignalAll(int sig);

  absl::StatusOr<JobStatus> Status(absl::Duration timeout = absl::Seconds(5));
  // Polls the chief's status until `pred` holds for it and returns that status (a call that
  // fails counts as "not yet": the chief may be restarting). DEADLINE_EXCEEDED, with the last
  // status and the logs, after `timeout`.
  absl::StatusOr<JobStatus> WaitForStatus(const std::function<bool(const JobStatus&)>& pred,
                                          absl::Duration timeout = absl::Minutes(2));
  // Polls until the job's state is `state`; fails at once (with the logs) when the job ended
  // in another terminal state. A chief that is away for a moment (restarting) is waited for.
  absl::StatusOr<JobStatus> WaitForState(JobStatus::State state, absl::Duration timeout);
  absl::StatusOr<std::unique_ptr<PsClient>> NewPsClient() const;
  // Every variable on the ps, whole, in VariableNames() order (tests compare runs with it); a
  // dynamic table, which has no whole, at `dynamic_keys` (its rows for those keys, in order).
  absl::StatusOr<std::vector<std::vector<float>>> PullAllVariables(
      const std::vector<int64_t>& dynamic_keys = {}) const;
  // Every incarnation's log of every daemon, labelled.
  std::string Logs() const;

 private:
  // One task of the cluster and every process that has served it.
  struct Task {
    std::string binary;  // runfiles path, e.g. "ps_server/ps"
    std::string type;    // TF_CONFIG task type
    int index = 0;
    std::vector<std::string> args;
    std::unique_ptr<Process> current;
    std::vector<std::unique_ptr<Process>> past;  // earlier incarnations, oldest first
  };

  TrainingCluster() = default;
  std::unique_ptr<Task> NewTask(const std::string& binary, const std::string& type, int index,
                                std::vector<std::string> args) const;
  // Starts a new incarnation of `task` (the current one, if any, must have exited).
  absl::Status Launch(Task* task);
  static absl::StatusOr<int> Stop(Task* task, int sig);
  // Waits for the chief to answer (see RestartChief).
  absl::Status WaitForChief();
  std::vector<Task*> AllTasks() const;

  int generation_ = 0;  // distinguishes clusters started by one test in their log names
  std::string dir_;
  std::map<std::string, std::vector<std::string>> spec_;  // the TF_CONFIG cluster
  std::string chief_address_;
  std::vector<std::string> ps_addresses_;
  std::string metrics_file_;
  std::unique_ptr<CoordinatorService::Stub> stub_;
  std::vector<std::unique_ptr<Task>> ps_;
  std::vector<std::unique_ptr<Task>> workers_;
  std::unique_ptr<Task> evaluator_;
  std::unique_ptr<Task> chief_;
};

// Writes `json` to a fresh file in the test's temp dir and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& json);

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_TRAINING_CLUSTER_H_
