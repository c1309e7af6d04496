// LoopbackLauncher: a Launcher that runs each daemon as a child process of this one, at an
// address of its own on the loopback network (tests/process.h's LoopbackAddress), configured
// by TF_CONFIG. A test may play the supervisor: stop one daemon (any signal) and start it
// again at the same address with the same flags, as a new incarnation with its own log. The
// destructor stops every daemon (SIGTERM, then SIGKILL).
//
// Thread-safety: a LoopbackLauncher is used from one thread.
#ifndef SHARDPS_TESTS_LOOPBACK_LAUNCHER_H_
#define SHARDPS_TESTS_LOOPBACK_LAUNCHER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/launcher.h"
#include "tests/process.h"

namespace shardps {
namespace testing {

class LoopbackLauncher final : public Launcher {
 public:
  struct Options {
    int num_ps = 2;
    int num_workers = 2;
    bool evaluator = false;
    // The evaluator runs outside TF_CONFIG's cluster (as Kubeflow's TFJob starts it): only its
    // own TF_CONFIG names its task; the other daemons' clusters have no evaluator.
    bool evaluator_outside_cluster = false;
    // false: the chief is in TF_CONFIG but never started (a cluster of ps tasks alone).
    bool start_chief = true;
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
    // false: the workers are in TF_CONFIG but not started (Launch starts them); the chief
    // then runs the job without a worker, and no step is done.
    bool start_workers = true;
  };

  // Starts the ps, the workers and the evaluator, waits (up to 60 s) until every ps and
  // worker accepts connections (so that a chief given a --job reaches them all at its start;
  // a task that exits meanwhile is not waited for), then starts the chief. Does not wait for
  // the chief.
  static absl::StatusOr<std::unique_ptr<LoopbackLauncher>> Start(const Options& options);
  ~LoopbackLauncher() override;

  std::string chief_address() const override { return spec_.at("chief").at(0); }
  std::optional<absl::Status> ChiefEnded() override;
  pid_t Pid(const std::string& task) const override;
  std::string Log(const std::string& task) const override;
  std::string Logs() const override;

  // The TF_CONFIG addresses of a role ("ps", "worker", "evaluator"); empty without one.
  std::vector<std::string> Addresses(const std::string& type) const;
  const std::string& metrics_file() const { return metrics_file_; }
  // The current incarnation of a task's daemon (null: not started, or stopped and not
  // started again; or no such task).
  Process* Current(const std::string& type, int index) const;

  // Starts a new incarnation of the task at its address with its flags (its own log file).
  // FAILED_PRECONDITION while the current one still runs.
  absl::Status Launch(const std::string& type, int index);
  // Sends `sig` and waits (up to 60 s) for the task's daemon to exit: its exit code (128 +
  // signal when killed).
  absl::StatusOr<int> Stop(const std::string& type, int index, int sig);
  // Sends `sig` to every daemon at once (a machine lost, say) and waits for all to exit;
  // whatever does not exit in 10 s is killed.
  void SignalAll(int sig);

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

  LoopbackLauncher() = default;
  std::unique_ptr<Task> NewTask(const std::string& binary, const std::string& type, int index,
                                std::vector<std::string> args) const;
  // Makes the tasks (and the TF_CONFIG cluster); starts none.
  void AddTasks(const Options& options);
  Task* Find(const std::string& type, int index) const;
  absl::Status Launch(Task* task);
  // Waits until every started ps and worker accepts connections.
  void WaitForPsAndWorkers() const;
  // Every task, in the order they are signalled: chief, evaluator, workers, ps.
  std::vector<Task*> AllTasks() const;

  int generation_ = 0;  // distinguishes clusters started by one test in their log names
  std::string dir_;
  std::map<std::string, std::vector<std::string>> spec_;  // the TF_CONFIG cluster
  std::string metrics_file_;
  std::vector<std::unique_ptr<Task>> ps_;
  std::vector<std::unique_ptr<Task>> workers_;
  std::unique_ptr<Task> evaluator_;
  std::unique_ptr<Task> chief_;
};

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_LOOPBACK_LAUNCHER_H_
