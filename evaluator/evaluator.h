// Evaluator: measures the model on held-out data while it trains. Pulls a consistent
// snapshot of the parameters (every shard of every variable at the same version), evaluates
// the whole test set once (every example exactly once), and formats the result as a JSON line
// for the metrics file. No gRPC here: the daemon (evaluator_main.cc) talks to the chief.
//
// Thread-safety: an Evaluator is used by one thread.
#ifndef SHARDPS_EVALUATOR_EVALUATOR_H_
#define SHARDPS_EVALUATOR_EVALUATOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/ps_client.h"
#include "proto/job.pb.h"
#include "worker/compute/backend.h"
#include "worker/compute/model.h"
#include "worker/data/idx_reader.h"

namespace shardps {

class Evaluator {
 public:
  // Loads the test split of the job's dataset and checks that the ps hold every parameter.
  static absl::StatusOr<std::unique_ptr<Evaluator>> Create(const JobSpec& job, PsClient* ps,
                                                           ComputeBackend* backend);

  // Pulls a snapshot whose shards all have one version (retrying up to `max_attempts` times
  // while updates land between shards), then evaluates every test example. `consistent`
  // (optional) says whether the snapshot was consistent; if it never was, the last pull is
  // evaluated and result.step is its lowest version.
  absl::StatusOr<EvalMetrics> Evaluate(int max_attempts = 50, bool* consistent = nullptr);

  const std::string& job_id() const { return job_.job_id(); }

 private:
  Evaluator(JobSpec job, PsClient* ps, ComputeBackend* backend, ModelSpec model, Dataset test);

  JobSpec job_;
  PsClient* ps_;
  ComputeBackend* backend_;
  ModelSpec model_;
  Dataset test_;
  std::vector<ParamInfo> params_;
  std::vector<std::vector<float>> values_;
};

// One line of the metrics file (JSON, no newline).
std::string EvalJsonLine(const std::string& job_id, const EvalMetrics& result, int64_t steps_done,
                         bool consistent, bool final);

}  // namespace shardps

#endif  // SHARDPS_EVALUATOR_EVALUATOR_H_
