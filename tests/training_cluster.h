// TrainingCluster: a whole local shardps cluster as real processes — chief, ps, workers and
// optionally an evaluator — on free localhost ports, for process-level training tests.
// Stopped (SIGTERM, then SIGKILL) by the destructor.
#ifndef SHARDPS_TESTS_TRAINING_CLUSTER_H_
#define SHARDPS_TESTS_TRAINING_CLUSTER_H_

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
    bool long_lived = false;  // chief keeps ps and workers up after the job
    std::string job_file;     // chief --job; empty: submit later
  };
  static absl::StatusOr<std::unique_ptr<TrainingCluster>> Start(const Options& options);
  ~TrainingCluster();

  const std::string& chief_address() const { return chief_address_; }
  const std::vector<std::string>& ps_addresses() const { return ps_addresses_; }
  Process* chief() { return chief_.get(); }
  Process* worker(int i) { return workers_[i].get(); }
  Process* evaluator() { return evaluator_.get(); }
  const std::string& metrics_file() const { return metrics_file_; }

  absl::StatusOr<JobStatus> Status(absl::Duration timeout = absl::Seconds(5));
  // Polls until the job's state is terminal (and the chief reports the job ended).
  absl::StatusOr<JobStatus> WaitForState(JobStatus::State state, absl::Duration timeout);
  absl::StatusOr<std::unique_ptr<PsClient>> NewPsClient() const;
  std::string Logs() const;

 private:
  std::string chief_address_;
  std::vector<std::string> ps_addresses_;
  std::string metrics_file_;
  std::unique_ptr<CoordinatorService::Stub> stub_;
  std::vector<std::unique_ptr<Process>> ps_;
  std::vector<std::unique_ptr<Process>> workers_;
  std::unique_ptr<Process> evaluator_;
  std::unique_ptr<Process> chief_;
};

// Writes `json` to a fresh file in the test's temp dir and returns its path.
std::string WriteTempFile(const std::string& name, const std::string& json);

}  // namespace testing
}  // namespace shardps

#endif  // SHARDPS_TESTS_TRAINING_CLUSTER_H_
